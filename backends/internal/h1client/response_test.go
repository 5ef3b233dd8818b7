package h1client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// checkSimpleResponse reads input with readSimpleResponse and with
// http.ReadResponse and fails unless the fast parser either declines,
// having consumed nothing, or gives what ReadResponse gives: status,
// header, framing, connection state, body (with its error) and the bytes
// left after it. It returns whether the fast parser took the input.
func checkSimpleResponse(t *testing.T, input []byte, req *http.Request) bool {
	t.Helper()
	br := bufio.NewReaderSize(bytes.NewReader(input), 32<<10)
	got, ok := readSimpleResponse(br, req)
	if !ok {
		rest, _ := io.ReadAll(br)
		if !bytes.Equal(rest, input) {
			t.Fatalf("declined %q but consumed %d bytes of it", input, len(input)-len(rest))
		}
		return false
	}
	rbr := bufio.NewReaderSize(bytes.NewReader(input), 32<<10)
	want, err := http.ReadResponse(rbr, req)
	if err != nil {
		t.Fatalf("fast parser took %q, which http.ReadResponse refuses: %v", input, err)
	}
	type framing struct {
		Status                string
		StatusCode            int
		Proto                 string
		ProtoMajor            int
		ProtoMinor            int
		Header                http.Header
		ContentLength         int64
		TransferEncoding      []string
		Close, Uncompressed   bool
		Trailer               http.Header
		RequestIsTheSameValue bool
	}
	view := func(r *http.Response) framing {
		return framing{r.Status, r.StatusCode, r.Proto, r.ProtoMajor, r.ProtoMinor, r.Header,
			r.ContentLength, r.TransferEncoding, r.Close, r.Uncompressed, r.Trailer, r.Request == req}
	}
	if g, w := view(got), view(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("input %q:\nfast parser  %+v\nReadResponse %+v", input, g, w)
	}
	gb, gerr := io.ReadAll(got.Body)
	wb, werr := io.ReadAll(want.Body)
	if !bytes.Equal(gb, wb) || (gerr == nil) != (werr == nil) ||
		errors.Is(gerr, io.ErrUnexpectedEOF) != errors.Is(werr, io.ErrUnexpectedEOF) {
		t.Fatalf("input %q: body %q (%v), ReadResponse's %q (%v)", input, gb, gerr, wb, werr)
	}
	if werr == nil {
		grest, _ := io.ReadAll(br)
		wrest, _ := io.ReadAll(rbr)
		if !bytes.Equal(grest, wrest) {
			t.Fatalf("input %q: %q left after the body, ReadResponse leaves %q", input, grest, wrest)
		}
	}
	return true
}

var postRequest = &http.Request{Method: http.MethodPost}

// simpleResponseCases are answers the fast parser must take (fast) or
// leave to http.ReadResponse; the second group is what an attacker
// controlling a backend would try to get past one parser and not the
// other.
var simpleResponseCases = []struct {
	name  string
	input string
	fast  bool
}{
	{"uvicorn", "HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 06:00:00 GMT\r\nserver: uvicorn\r\ncontent-length: 5\r\ncontent-type: application/json\r\n\r\n{\"a\"}", true},
	{"net/http", "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Tue, 01 Dec 2026 06:00:00 GMT\r\nContent-Length: 3\r\n\r\nabc", true},
	{"repeated key and odd case", "HTTP/1.1 200 OK\r\nx-a: 1\r\nX-A: 2\r\nfoo-BAR-baz: 3\r\nContent-Length: 0\r\n\r\n", true},
	{"empty and padded values", "HTTP/1.1 404 Not Found\r\nX-Empty:\r\nX-Pad: \t v \t\r\nContent-Length: 2\r\n\r\nno", true},
	{"obs-text value", "HTTP/1.1 200 OK\r\nX-T: caf\xc3\xa9\r\nContent-Length: 1\r\n\r\nx", true},
	{"connection close is dropped", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", true},
	{"connection keep-alive is kept", "HTTP/1.1 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", true},
	{"no reason phrase", "HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n", true},
	{"reason with trailing space", "HTTP/1.1 200 OK \r\nContent-Length: 0\r\n\r\n", true},
	{"leading zeros", "HTTP/1.1 200 OK\r\nContent-Length: 007\r\n\r\n1234567", true},
	{"body cut short", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true},
	{"second answer stays buffered", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
	{"known names", "HTTP/1.1 200 OK\r\nETAG: x\r\nx-request-id: 7\r\nCACHE-CONTROL: no-store\r\nVary: a\r\nContent-Length: 0\r\n\r\n", true},

	{"informational first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false},
	{"no content", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", false},
	{"not modified", "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", false},
	{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"HTTP/2 line", "HTTP/2 200 OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"no length: read to close", "HTTP/1.1 200 OK\r\n\r\nabc", false},
	{"length and chunked", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
	{"chunked and length", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", false},
	{"chunked", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", false},
	{"two equal lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", false},
	{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy", false},
	{"length list", "HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nxy", false},
	{"signed length", "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx", false},
	{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nx", false},
	{"hex length", "HTTP/1.1 200 OK\r\nContent-Length: 0x1\r\n\r\nx", false},
	{"spaced length", "HTTP/1.1 200 OK\r\nContent-Length: 1 0\r\n\r\nx", false},
	{"empty length", "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nx", false},
	{"19-digit length", "HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\nx", false},
	{"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\nx", false},
	{"space in name", "HTTP/1.1 200 OK\r\nContent Length: 1\r\nContent-Length: 1\r\n\r\nx", false},
	{"folded line", "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 1\r\n\r\nx", false},
	{"folded first line", "HTTP/1.1 200 OK\r\n Content-Length: 1\r\nContent-Length: 1\r\n\r\nx", false},
	{"bare LF line", "HTTP/1.1 200 OK\r\nContent-Length: 1\nX-A: 1\r\n\r\nx", false},
	{"bare LF header end", "HTTP/1.1 200 OK\nContent-Length: 1\n\nx", false},
	{"bare CR in value", "HTTP/1.1 200 OK\r\nX-A: a\rContent-Length: 9\r\nContent-Length: 1\r\n\r\nx", false},
	{"bare CR in reason", "HTTP/1.1 200 OK\rX: y\r\nContent-Length: 1\r\n\r\nx", false},
	{"NUL in value", "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 1\r\n\r\nx", false},
	{"DEL in value", "HTTP/1.1 200 OK\r\nX-A: a\x7fb\r\nContent-Length: 1\r\n\r\nx", false},
	{"empty name", "HTTP/1.1 200 OK\r\n: x\r\nContent-Length: 1\r\n\r\nx", false},
	{"no colon", "HTTP/1.1 200 OK\r\nnot a header\r\nContent-Length: 1\r\n\r\nx", false},
	{"connection list", "HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\nx", false},
	{"two connection headers", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", false},
	{"connection upgrade", "HTTP/1.1 200 OK\r\nConnection: upgrade\r\nContent-Length: 1\r\n\r\nx", false},
	{"pragma", "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 1\r\n\r\nx", false},
	{"trailer", "HTTP/1.1 200 OK\r\nTrailer: X-A\r\nContent-Length: 1\r\n\r\nx", false},
	{"four-digit status", "HTTP/1.1 2000 OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"letter in status", "HTTP/1.1 20x OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"two spaces before status", "HTTP/1.1  200 OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"tab after status", "HTTP/1.1 200\tOK\r\nContent-Length: 1\r\n\r\nx", false},
	{"status 600", "HTTP/1.1 600 X\r\nContent-Length: 1\r\n\r\nx", false},
	{"status 099", "HTTP/1.1 099 X\r\nContent-Length: 1\r\n\r\nx", false},
	{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\n\r\n", false},
	{"header cut short", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n", false},
	{"empty", "", false},
	{"too many lines", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: 1\r\n", maxSimpleHeaders) + "Content-Length: 1\r\n\r\nx", false},
	{"header past the buffer", "HTTP/1.1 200 OK\r\nX-A: " + strings.Repeat("a", 40<<10) + "\r\nContent-Length: 1\r\n\r\nx", false},
}

func TestSimpleResponseMatchesReadResponse(t *testing.T) {
	for _, c := range simpleResponseCases {
		t.Run(c.name, func(t *testing.T) {
			if got := checkSimpleResponse(t, []byte(c.input), postRequest); got != c.fast {
				t.Fatalf("fast parser took it: %v, want %v", got, c.fast)
			}
		})
	}
	// A HEAD answer has no body whatever its length says: ReadResponse's.
	head := &http.Request{Method: http.MethodHead}
	if checkSimpleResponse(t, []byte(simpleResponseCases[0].input), head) {
		t.Fatal("fast parser took the answer to a HEAD request")
	}
}

// TestSimpleResponseLargestHeaderAcrossReads feeds a header one byte per
// Read, so that peekHeader must read on and find the blank line across
// reads, up to the most lines it takes.
func TestSimpleResponseLargestHeaderAcrossReads(t *testing.T) {
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\n")
	for i := range maxSimpleHeaders - 1 {
		fmt.Fprintf(&b, "X-H%d: %d\r\n", i, i)
	}
	b.WriteString("Content-Length: 4\r\n\r\nbodyHTTP/1.1")
	br := bufio.NewReaderSize(&oneByteReader{s: b.String()}, 32<<10)
	resp, ok := readSimpleResponse(br, postRequest)
	if !ok {
		t.Fatal("declined a header of the most lines it takes")
	}
	if len(resp.Header) != maxSimpleHeaders || resp.ContentLength != 4 {
		t.Fatalf("%d headers, length %d", len(resp.Header), resp.ContentLength)
	}
	body, err := io.ReadAll(resp.Body)
	if string(body) != "body" || err != nil {
		t.Fatalf("body %q, %v", body, err)
	}
	if rest, _ := io.ReadAll(br); string(rest) != "HTTP/1.1" {
		t.Fatalf("left %q after the body", rest)
	}
}

type oneByteReader struct{ s string }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.s[0]
	r.s = r.s[1:]
	return 1, nil
}

// FuzzSimpleResponse checks that whatever the fast parser takes,
// http.ReadResponse reads to the same response, body and remainder; its
// corpus is the table above. Run beyond the corpus with
// go test ./backends -run '^$' -fuzz FuzzSimpleResponse -fuzztime 60s.
func FuzzSimpleResponse(f *testing.F) {
	for _, c := range simpleResponseCases {
		if len(c.input) < 4<<10 {
			f.Add([]byte(c.input))
		}
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		if len(input) > 64<<10 {
			return
		}
		checkSimpleResponse(t, input, postRequest)
	})
}

func BenchmarkReadResponseHeader(b *testing.B) {
	const answer = "HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 06:00:00 GMT\r\nserver: uvicorn\r\n" +
		"content-length: 213\r\ncontent-type: application/json\r\n\r\n"
	input := []byte(answer + strings.Repeat("x", 213))
	for _, name := range []string{"ReadResponse", "simple"} {
		b.Run(name, func(b *testing.B) {
			r := bytes.NewReader(input)
			br := bufio.NewReaderSize(r, 32<<10)
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(input)
				br.Reset(r)
				var resp *http.Response
				if name == "simple" {
					var ok bool
					if resp, ok = readSimpleResponse(br, postRequest); !ok {
						b.Fatal("declined")
					}
				} else {
					var err error
					if resp, err = http.ReadResponse(br, postRequest); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
