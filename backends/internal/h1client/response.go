package h1client

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
)

// The fast path's response header. http.ReadResponse builds a
// textproto.Reader, counts the header's lines ahead, canonicalizes every
// key, allocates every line and value, and wraps the body in a reader with
// a mutex: about 8% of the router's CPU at 1 KiB (docs/benchmarks.md,
// "Overhead against HAProxy"). What vLLM and its peers send for a plain answer is
// far simpler: "HTTP/1.1 200 OK", a Content-Length and a handful of
// ordinary headers. readSimpleResponse parses exactly that shape, taking
// the whole header from the connection's buffer, and says no to anything
// else, for http.ReadResponse to read as before: an informational status,
// HTTP/1.0, a Transfer-Encoding, no or repeated Content-Length, a
// Connection header other than one keep-alive or close, Pragma (which
// ReadResponse rewrites), Trailer, folded lines, a bare CR or LF, any byte
// a header may not hold, more than maxSimpleHeaders lines, a header that
// does not fit the buffer, a HEAD request. Saying no costs nothing: no
// byte is consumed until the header has been accepted whole.
//
// Strictness is the point. A parser that accepted what http.ReadResponse
// refuses, or read a different length, would let a backend smuggle a
// second answer into the connection; so every accepted header must be one
// that ReadResponse reads to the same status, header, length and
// connection state (TestSimpleResponseMatchesReadResponse and
// FuzzSimpleResponse check this).

// maxSimpleHeaders bounds the header lines the fast parser takes; a longer
// header is read by http.ReadResponse under the header size limit.
const maxSimpleHeaders = 64

// tokenByte marks the bytes of an HTTP token (RFC 9110 tchar), which is
// what a header name may hold.
var tokenByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range []byte("!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	return t
}()

// valueByte reports whether c may appear in a header value or reason
// phrase: visible ASCII, space, tab and obs-text, never CR, LF, NUL or
// another control byte.
func valueByte(c byte) bool {
	return c == '\t' || (c >= ' ' && c != 0x7f)
}

// knownHeaderKeys are the canonical names a backend's answer usually
// carries: a name that matches one ignoring case takes the constant,
// without the allocation of a canonicalized copy.
var knownHeaderKeys = [...]string{
	"Content-Type", "Content-Length", "Date", "Server", "Connection",
	"Cache-Control", "Vary", "Keep-Alive", "X-Request-Id", "Content-Encoding",
	"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials",
	"Transfer-Encoding", "Trailer", "Pragma", "Etag", "Location",
}

// canonicalKey returns name in canonical form (as textproto writes it):
// the constant when it is a known name, else a new string.
func canonicalKey(name []byte) string {
	for _, k := range knownHeaderKeys {
		if len(k) == len(name) && equalFoldASCII(name, k) {
			return k
		}
	}
	return http.CanonicalHeaderKey(string(name))
}

// equalFoldASCII reports whether b equals s ignoring ASCII case; s is a
// token, so folding bit 5 of letters only is exact.
func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		x, y := b[i], s[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
			return false
		}
	}
	return true
}

// trimOWS trims spaces and tabs at both ends, as textproto does to a
// value.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// peekHeader returns the buffered bytes of a response header through its
// blank line, reading more from the connection as needed, or false when
// the header does not fit the buffer or the reads end first (and then
// http.ReadResponse reads what is buffered and meets the same end).
func peekHeader(br *bufio.Reader) ([]byte, bool) {
	n := br.Buffered()
	if n == 0 {
		n = 1
	}
	from := 0
	for {
		if _, err := br.Peek(n); err != nil {
			return nil, false
		}
		b, _ := br.Peek(br.Buffered())
		if i := bytes.Index(b[from:], []byte("\r\n\r\n")); i >= 0 {
			return b[:from+i+4], true
		}
		// A terminator may straddle this peek and the next.
		from = max(len(b)-3, 0)
		n = len(b) + 1
	}
}

// readSimpleResponse reads a response header of the simple shape from br
// (see above) and returns the response with its body, or false with
// nothing read.
func readSimpleResponse(br *bufio.Reader, req *http.Request) (*http.Response, bool) {
	if req != nil && req.Method == http.MethodHead {
		return nil, false
	}
	hdr, ok := peekHeader(br)
	if !ok {
		return nil, false
	}
	a, ok := parseSimpleResponse(hdr, req)
	if !ok {
		return nil, false
	}
	br.Discard(len(hdr))
	resp := &a.resp
	if resp.ContentLength == 0 {
		resp.Body = http.NoBody
	} else {
		a.body = lengthBody{br: br, n: resp.ContentLength, answer: a}
		resp.Body = &a.body
	}
	return resp, true
}

// simpleAnswer holds a simply shaped response's objects in one
// allocation, since they live and die together: the response, its body,
// exchange's wrapper of that body, the idle timeout's wrapper of that
// (Forward's), and the header's first values.
type simpleAnswer struct {
	resp   http.Response
	body   lengthBody
	outer  responseBody
	idle   IdleBody
	values [8]string
}

// parseSimpleResponse parses hdr, a whole response header ending in its
// blank line, into a response without a body, or returns false.
func parseSimpleResponse(hdr []byte, req *http.Request) (*simpleAnswer, bool) {
	const proto = "HTTP/1.1 "
	if len(hdr) < len(proto)+3+4 || string(hdr[:len(proto)]) != proto {
		return nil, false
	}
	eol := bytes.IndexByte(hdr, '\n')
	if eol <= len(proto) || hdr[eol-1] != '\r' {
		return nil, false
	}
	line := hdr[len(proto) : eol-1]
	code, ok := statusCode(line)
	if !ok {
		return nil, false
	}
	// Every line ends in a LF, the status line and the blank one too.
	lines := bytes.Count(hdr, []byte{'\n'}) - 2
	if lines > maxSimpleHeaders {
		return nil, false
	}
	// One string holds the status and every value; the response's
	// strings are slices of it.
	s := string(hdr[len(proto) : len(hdr)-2])
	a := &simpleAnswer{resp: http.Response{
		Status: s[:len(line)], StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		ContentLength: -1, Request: req,
	}}
	if !a.parseFields(hdr, s, eol+1, len(proto), lines) {
		return nil, false
	}
	return a, true
}

// statusCode reads a status line's code and reason: three digits, 200 to
// 599 but 204 and 304 (which have no body whatever the header says:
// ReadResponse's rule), then nothing or one space and a reason phrase.
func statusCode(line []byte) (int, bool) {
	if len(line) < 3 || line[0] < '2' || line[0] > '5' || line[1] < '0' || line[1] > '9' ||
		line[2] < '0' || line[2] > '9' {
		return 0, false
	}
	if len(line) > 3 {
		if line[3] != ' ' {
			return 0, false
		}
		for _, c := range line[4:] {
			if !valueByte(c) {
				return 0, false
			}
		}
	}
	code := int(line[0]-'0')*100 + int(line[1]-'0')*10 + int(line[2]-'0')
	if code == http.StatusNoContent || code == http.StatusNotModified {
		return 0, false
	}
	return code, true
}

// parseFields parses the header lines of hdr from off on into a.resp,
// whose values are slices of s, the string of hdr from skip on.
func (a *simpleAnswer) parseFields(hdr []byte, s string, off, skip, lines int) bool {
	resp := &a.resp
	h := make(http.Header, lines)
	// One backing array holds the values, each key's first one in a
	// slice of capacity one; a repeated key's append copies out of it.
	strs := a.values[:]
	if lines > len(a.values) {
		strs = make([]string, lines)
	}
	for off < len(hdr)-2 {
		end := off + bytes.IndexByte(hdr[off:], '\n')
		if end <= off || hdr[end-1] != '\r' {
			return false
		}
		kv := hdr[off : end-1]
		colon := bytes.IndexByte(kv, ':')
		if colon <= 0 || !fieldBytes(kv, colon) {
			return false // no colon or no name (a fold fails the token check)
		}
		key := canonicalKey(kv[:colon])
		raw := trimOWS(kv[colon+1:])
		// raw is a slice of hdr; the value is the same bytes of s.
		start := off + colon + 1 + len(kv[colon+1:]) - len(trimOWSLeft(kv[colon+1:])) - skip
		value := s[start : start+len(raw)]
		off = end + 1
		keep, ok := framingField(resp, h, key, raw)
		if !ok {
			return false
		}
		if !keep {
			continue
		}
		if vs, seen := h[key]; seen {
			h[key] = append(vs, value)
		} else {
			strs[0] = value
			h[key] = strs[:1:1]
			strs = strs[1:]
		}
	}
	if resp.ContentLength < 0 {
		return false // read to the connection's end: ReadResponse's
	}
	resp.Header = h
	return true
}

// fieldBytes reports whether kv, a header line with its colon at colon,
// has a token for a name and only value bytes after it.
func fieldBytes(kv []byte, colon int) bool {
	for _, c := range kv[:colon] {
		if !tokenByte[c] {
			return false
		}
	}
	for _, c := range kv[colon+1:] {
		if !valueByte(c) {
			return false
		}
	}
	return true
}

// framingField applies a field that frames the answer to resp: ok is false
// for one the simple shape refuses, keep false for one ReadResponse
// drops from the header.
func framingField(resp *http.Response, h http.Header, key string, raw []byte) (keep, ok bool) {
	switch key {
	case "Transfer-Encoding", "Trailer", "Pragma":
		return false, false
	case "Content-Length":
		if resp.ContentLength >= 0 || len(raw) == 0 || len(raw) > 18 {
			return false, false
		}
		var n int64
		for _, c := range raw {
			if c < '0' || c > '9' {
				return false, false
			}
			n = n*10 + int64(c-'0')
		}
		resp.ContentLength = n
	case "Connection":
		if _, seen := h["Connection"]; seen || resp.Close {
			return false, false
		}
		switch {
		case equalFoldASCII(raw, "close"):
			// ReadResponse drops the header it acted on.
			resp.Close = true
			return false, true
		case equalFoldASCII(raw, "keep-alive"):
		default:
			return false, false
		}
	}
	return true, true
}

// trimOWSLeft trims spaces and tabs at the start.
func trimOWSLeft(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// lengthBody is a response body of a known length on the connection's
// buffered reader. It reports io.EOF with its last bytes, so that the
// connection is released without one more Read, and io.ErrUnexpectedEOF
// when the connection ends short, as net/http's body does.
type lengthBody struct {
	br *bufio.Reader
	n  int64
	// answer is the simpleAnswer the body is part of, whose outer field
	// exchange uses for its wrapper.
	answer *simpleAnswer
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	if b.n == 0 {
		return n, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Close does nothing: responseBody, which wraps it, owns the connection.
func (b *lengthBody) Close() error { return nil }
