package h1front

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

const testMaxBody = 1 << 20

// plainHeadCases are request heads (and what follows them) with the
// verdict parsePlainHead must reach.
var plainHeadCases = []struct {
	name string
	raw  string
	want headVerdict
}{
	{"post", "POST /v1/chat/completions HTTP/1.1\r\nHost: router:8080\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", headPlain},
	{"get models", "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", headPlain},
	{"every path", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", headPlain},
	{"invocations", "POST /invocations HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", headPlain},
	{"readyz", "GET /readyz HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", headPlain},
	{"lower-case names", "POST /v1/completions HTTP/1.1\r\nhost: h\r\ncontent-length: 1\r\nx-request-id: abc\r\n\r\nx", headPlain},
	{"spaces and tabs around values", "POST /v1/completions HTTP/1.1\r\nHost:h\r\nContent-Length: \t1 \t\r\nAuthorization:   Bearer k  \r\n\r\nx", headPlain},
	{"repeated header", "GET /healthz HTTP/1.1\r\nHost: h\r\nAccept: a\r\nAccept: b\r\nX-A: 1\r\naccept: c\r\n\r\n", headPlain},
	{"empty value", "GET /healthz HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Blank:   \r\n\r\n", headPlain},
	{"connection close", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", headPlain},
	{"connection keep-alive", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", headPlain},
	{"pipelined", "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\nGET /readyz HTTP/1.1\r\nHost: h\r\n\r\n", headPlain},
	{"token punctuation in names", "GET /healthz HTTP/1.1\r\nHost: h\r\nX-!#$%&'*+.^_`|~: v\r\n\r\n", headPlain},
	{"traceparent", "POST /v1/explain HTTP/1.1\r\nHost: h\r\nTraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nContent-Length: 2\r\n\r\n{}", headPlain},
	{"body at the limit", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 1048576\r\n\r\n", headPlain},

	// Smuggling and framing: net/http decides.
	{"CL and TE", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", headOther},
	{"TE chunked", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", headOther},
	{"TE identity", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\nContent-Length: 1\r\n\r\nx", headOther},
	{"TE lower case", "POST /v1/completions HTTP/1.1\r\nHost: h\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", headOther},
	{"duplicate CL, same", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", headOther},
	{"duplicate CL, different", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy", headOther},
	{"CL list", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 1\r\n\r\nx", headOther},
	{"CL plus sign", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\nx", headOther},
	{"CL minus sign", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\nx", headOther},
	{"CL hex", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 0x1\r\n\r\nx", headOther},
	{"CL leading zero", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 01\r\n\r\nx", headOther},
	{"CL inner space", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 1 0\r\n\r\nx", headOther},
	{"CL 19 digits", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775807\r\n\r\nx", headOther},
	{"CL over the limit", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 1048577\r\n\r\n", headOther},
	{"CL empty", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n", headOther},
	{"space before colon", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length : 1\r\n\r\nx", headOther},
	{"obs-fold", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n 2\r\nContent-Length: 1\r\n\r\nx", headOther},
	{"obs-fold with tab", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\t2\r\n\r\n", headOther},
	{"bare LF in head", "POST /v1/completions HTTP/1.1\r\nHost: h\nContent-Length: 1\r\n\r\nx", headOther},
	{"bare LF request line", "POST /v1/completions HTTP/1.1\nHost: h\r\n\r\n", headOther},
	{"bare CR in value", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nX-A: a\rContent-Length: 1\r\n\r\nx", headOther},
	{"NUL in value", "GET /healthz HTTP/1.1\r\nHost: h\r\nX-A: a\x00b\r\n\r\n", headOther},
	{"DEL in value", "GET /healthz HTTP/1.1\r\nHost: h\r\nX-A: a\x7fb\r\n\r\n", headOther},
	{"non-ASCII value", "GET /healthz HTTP/1.1\r\nHost: h\r\nX-A: caf\xc3\xa9\r\n\r\n", headOther},
	{"non-token name", "GET /healthz HTTP/1.1\r\nHost: h\r\nX@A: b\r\n\r\n", headOther},
	{"empty name", "GET /healthz HTTP/1.1\r\nHost: h\r\n: b\r\n\r\n", headOther},
	{"no colon", "GET /healthz HTTP/1.1\r\nHost: h\r\nX-A\r\n\r\n", headOther},
	{"no host", "GET /healthz HTTP/1.1\r\nX-A: b\r\n\r\n", headOther},
	{"two hosts", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", headOther},
	{"empty host", "GET /healthz HTTP/1.1\r\nHost:\r\n\r\n", headOther},
	{"host with slash", "GET /healthz HTTP/1.1\r\nHost: a/b\r\n\r\n", headOther},
	{"host with at", "GET /healthz HTTP/1.1\r\nHost: user@a\r\n\r\n", headOther},
	{"h2c preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", headOther},
	{"h2c upgrade", "GET /v1/models HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n", headOther},
	{"upgrade websocket", "GET /v1/models HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", headOther},
	{"two connection headers", "GET /v1/models HTTP/1.1\r\nHost: h\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n", headOther},
	{"connection list", "GET /v1/models HTTP/1.1\r\nHost: h\r\nConnection: close, x\r\n\r\n", headOther},
	{"expect", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx", headOther},
	{"trailer", "POST /v1/completions HTTP/1.1\r\nHost: h\r\nTrailer: X-A\r\nContent-Length: 1\r\n\r\nx", headOther},
	{"pragma", "GET /v1/models HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n", headOther},
	{"HTTP/1.0", "GET /v1/models HTTP/1.0\r\nHost: h\r\n\r\n", headOther},
	{"HTTP/1.1 lower case", "GET /v1/models http/1.1\r\nHost: h\r\n\r\n", headOther},
	{"extra space in request line", "GET  /v1/models HTTP/1.1\r\nHost: h\r\n\r\n", headOther},
	{"trailing space in request line", "GET /v1/models HTTP/1.1 \r\nHost: h\r\n\r\n", headOther},
	{"query", "GET /v1/models?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", headOther},
	{"other path", "POST /v1/embeddings HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", headOther},
	{"path prefix", "POST /v1/completionsx HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", headOther},
	{"absolute form", "POST http://h/v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", headOther},
	{"Connect path", "POST /prefixgate.v1.InferenceService/Chat HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", headOther},
	{"HEAD", "HEAD /v1/models HTTP/1.1\r\nHost: h\r\n\r\n", headOther},
	{"lower-case method", "post /v1/completions HTTP/1.1\r\nHost: h\r\n\r\n", headOther},
	{"PUT", "PUT /v1/completions HTTP/1.1\r\nHost: h\r\n\r\n", headOther},
	{"leading CRLF", "\r\nGET /v1/models HTTP/1.1\r\nHost: h\r\n\r\n", headOther},
	{"too many lines", "GET /v1/models HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("X-A: b\r\n", maxPlainHeaderLines) + "\r\n", headOther},

	{"empty", "", headMore},
	{"method prefix", "PO", headMore},
	{"line begun", "POST /v1/chat", headMore},
	{"head begun", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n", headMore},
}

func TestPlainHeadVerdicts(t *testing.T) {
	for _, tc := range plainHeadCases {
		_, _, v := parsePlainHead([]byte(tc.raw), testMaxBody)
		if v != tc.want {
			t.Errorf("%s: verdict %d, want %d", tc.name, v, tc.want)
		}
	}
}

// TestPlainHeadMatchesReadRequest: whatever the parser takes,
// http.ReadRequest reads the same way.
func TestPlainHeadMatchesReadRequest(t *testing.T) {
	took := 0
	for _, tc := range plainHeadCases {
		if msg := comparePlainHead([]byte(tc.raw)); msg != "" {
			t.Errorf("%s: %s", tc.name, msg)
		}
		if tc.want == headPlain {
			took++
		}
	}
	if took < 10 {
		t.Fatalf("only %d cases take the plain path", took)
	}
}

func FuzzPlainHead(f *testing.F) {
	for _, tc := range plainHeadCases {
		f.Add([]byte(tc.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if msg := comparePlainHead(raw); msg != "" {
			t.Fatal(msg)
		}
	})
}

// comparePlainHead returns "" when parsePlainHead leaves raw, or takes it
// as http.ReadRequest (with net/http's server's Host rule) reads it:
// method, target, protocol, header, host, length, Close, body and what
// follows the body.
func comparePlainHead(raw []byte) string {
	h, n, v := parsePlainHead(raw, testMaxBody)
	if v != headPlain {
		return ""
	}
	br := bufio.NewReaderSize(bytes.NewReader(raw), 1<<20)
	req, err := http.ReadRequest(br)
	if err != nil {
		return "net/http refuses what the parser took: " + err.Error()
	}
	if req.Header.Get("Host") != "" || len(req.Header["Host"]) > 0 {
		return "net/http kept Host in the header"
	}
	var diffs []string
	check := func(what string, same bool) {
		if !same {
			diffs = append(diffs, what)
		}
	}
	check("method", req.Method == h.method)
	check("path", req.URL.Path == h.path && req.URL.RawQuery == "" && req.URL.Host == "" && req.RequestURI == h.path)
	check("proto", req.Proto == "HTTP/1.1" && req.ProtoMajor == 1 && req.ProtoMinor == 1)
	check("host", req.Host == h.host)
	check("header", maps.EqualFunc(req.Header, h.header, slices.Equal[[]string]))
	check("length", req.ContentLength == h.contentLength)
	check("close", req.Close == h.close)
	if len(diffs) > 0 {
		return "differs from net/http in " + strings.Join(diffs, ", ")
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		// The body is cut short in raw: the parser reads it later, from
		// the connection, and fails there as net/http does.
		if int64(len(raw)-n) < h.contentLength {
			return ""
		}
		return "net/http's body: " + err.Error()
	}
	want := raw[n:min(len(raw), n+int(h.contentLength))]
	if !bytes.Equal(body, want) {
		return "body differs"
	}
	rest, _ := io.ReadAll(br)
	if !bytes.Equal(rest, raw[n+len(body):]) {
		return "bytes after the body differ"
	}
	return ""
}

// BenchmarkParsePlainHead parses the head a Go client sends and the head
// the OpenAI Python SDK sends (eleven more headers).
//
//	go test ./internal/server -run '^$' -bench ParsePlainHead -benchmem -count 5
func BenchmarkParsePlainHead(b *testing.B) {
	heads := map[string]string{
		"go": "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\n" +
			"Content-Length: 1024\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n",
		"openai-python": "POST /v1/chat/completions HTTP/1.1\r\nHost: router:8080\r\nAccept-Encoding: gzip, deflate\r\n" +
			"Connection: keep-alive\r\nAccept: application/json\r\nContent-Type: application/json\r\n" +
			"User-Agent: OpenAI/Python 1.54.4\r\nX-Stainless-Lang: python\r\nX-Stainless-Package-Version: 1.54.4\r\n" +
			"X-Stainless-OS: Linux\r\nX-Stainless-Arch: x64\r\nX-Stainless-Runtime: CPython\r\n" +
			"X-Stainless-Runtime-Version: 3.12.3\r\nAuthorization: Bearer sk-0123456789abcdef\r\n" +
			"X-Stainless-Async: false\r\nX-Stainless-Retry-Count: 0\r\nContent-Length: 1024\r\n\r\n",
	}
	for _, name := range []string{"go", "openai-python"} {
		head := []byte(heads[name])
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, v := parsePlainHead(head, testMaxBody); v != headPlain {
					b.Fatalf("verdict %v", v)
				}
			}
		})
	}
}
