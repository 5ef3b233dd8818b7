package h1front

import (
	"bytes"
	"net/http"
	"net/textproto"
	"strings"
)

// The plain request shape the HTTP/1.1 front door serves itself (front.go);
// every other request, and the rest of its connection, goes to net/http.
// The shape is what OpenAI SDKs, curl and load generators send: a request
// line "GET|POST <hot path> HTTP/1.1", CRLF line ends, token header names
// followed at once by a colon, printable ASCII values, exactly one Host,
// at most one Content-Length of digits within the body limit, and none of
// the headers that change how the connection or body is framed.

// headVerdict is what parsePlainHead made of the bytes so far.
type headVerdict int

const (
	// headMore: the bytes are a prefix of a plain request; read more.
	headMore headVerdict = iota
	// headPlain: a complete plain request head.
	headPlain
	// headOther: not the plain shape; net/http takes the connection.
	headOther
)

// maxPlainHeaderLines bounds the header lines of a plain request; a
// request with more goes to net/http, whose bound is in bytes only.
const maxPlainHeaderLines = 64

// PlainPaths are the request targets served on the fast path, as the
// constants the request carries (no allocation per request). Anything
// else, a query string included, goes to net/http.
var PlainPaths = [...]string{
	"/v1/chat/completions", "/v1/completions", "/invocations",
	"/v1/models", "/v1/explain", "/healthz", "/readyz",
}

// plainHead is a parsed plain request head.
type plainHead struct {
	method, path, host string
	header             http.Header
	contentLength      int64
	close              bool // Connection: close
}

// parsePlainHead reads a request head at the start of b. With headPlain,
// n is the head's length including its blank line. A body longer than
// maxBody is headOther: net/http answers it (413, lingering close).
func parsePlainHead(b []byte, maxBody int64) (h plainHead, n int, v headVerdict) {
	// Decide early on a first line that cannot be plain (the h2c preface,
	// other methods), so that its connection is handed over without
	// waiting for bytes the client may never send.
	switch {
	case bytes.HasPrefix(b, []byte("GET /")):
		h.method = http.MethodGet
	case bytes.HasPrefix(b, []byte("POST /")):
		h.method = http.MethodPost
	default:
		if len(b) < 6 && (bytes.HasPrefix([]byte("GET /"), b) || bytes.HasPrefix([]byte("POST /"), b)) {
			return h, 0, headMore
		}
		return h, 0, headOther
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return h, 0, headMore
	}
	block := b[:end+2] // every line with its CRLF
	eol := bytes.IndexByte(block, '\n')
	if !h.requestLine(block[:eol]) || !h.fields(block[eol+1:], maxBody) {
		return h, 0, headOther
	}
	return h, end + 4, headPlain
}

// requestLine reads the request line (with its CR, without its LF) after
// the method: a plain path and HTTP/1.1.
func (h *plainHead) requestLine(line []byte) bool {
	if line[len(line)-1] != '\r' {
		return false
	}
	line = line[len(h.method)+1 : len(line)-1]
	target, proto, ok := bytes.Cut(line, []byte(" "))
	if !ok || string(proto) != "HTTP/1.1" {
		return false
	}
	for _, p := range PlainPaths {
		if string(target) == p {
			h.path = p
			return true
		}
	}
	return false
}

// fields reads the header lines, each with its CRLF, into h.
func (h *plainHead) fields(rest []byte, maxBody int64) bool {
	// Count the lines first, so that the values share one string and one
	// slice of strings.
	lines := bytes.Count(rest, []byte("\n"))
	if lines > maxPlainHeaderLines {
		return false
	}
	text := string(rest) // one allocation holds every name and value
	values := make([]string, lines)
	h.header = make(http.Header, lines)
	h.contentLength = -1
	hosts, conns := 0, 0
	for i := 0; len(text) > 0; i++ {
		eol := strings.IndexByte(text, '\n')
		line := text[:eol]
		text = text[eol+1:]
		key, value, ok := plainField(line)
		if !ok {
			return false
		}
		switch key {
		case "Host":
			hosts++
			if !plainHost(value) {
				return false
			}
			h.host = value
			continue // net/http keeps the host in Request.Host only
		case "Content-Length", "Connection", "Transfer-Encoding", "Upgrade", "Expect",
			"Http2-Settings", "Trailer", "Te", "Pragma":
			if key == "Connection" {
				conns++
			}
			if !h.framing(key, value, maxBody) {
				return false
			}
		}
		values[i] = value
		if vs, repeated := h.header[key]; repeated {
			h.header[key] = append(vs, value)
		} else {
			h.header[key] = values[i : i+1 : i+1]
		}
	}
	if hosts != 1 || conns > 1 {
		return false
	}
	h.contentLength = max(h.contentLength, 0)
	return true
}

// plainField splits a header line (with its CR) into its canonical name
// and its value, or reports false for a line that is not plain.
func plainField(line string) (key, value string, ok bool) {
	if len(line) < 2 || line[len(line)-1] != '\r' {
		return "", "", false // bare LF, or an empty line inside the head
	}
	line = line[:len(line)-1]
	colon := strings.IndexByte(line, ':')
	if colon <= 0 || !plainToken(line[:colon]) {
		return "", "", false // no name, a space before the colon, obs-fold
	}
	value = trimOWS(line[colon+1:])
	if !plainValue(value) {
		return "", "", false // control bytes (a bare CR among them), non-ASCII
	}
	return textproto.CanonicalMIMEHeaderKey(line[:colon]), value, true
}

// framing takes a field that frames the request: one Content-Length of
// digits within maxBody, a Connection of close or keep-alive; any other
// framing field is not plain.
func (h *plainHead) framing(key, value string, maxBody int64) bool {
	switch key {
	case "Content-Length":
		if h.contentLength >= 0 {
			return false // repeated, even with the same value
		}
		cl, ok := plainLength(value)
		if !ok || cl > maxBody {
			return false
		}
		h.contentLength = cl
		return true
	case "Connection":
		switch {
		case asciiEqualFold(value, "close"):
			h.close = true
			return true
		case asciiEqualFold(value, "keep-alive"):
			return true
		}
		return false // an upgrade, or a list
	}
	return false
}

// trimOWS drops the spaces and tabs around a header value.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// plainToken reports whether s is an RFC 9110 token.
func plainToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || tokenByte[c] == 0 {
			return false
		}
	}
	return true
}

var tokenByte = func() (t [128]byte) {
	for c := '0'; c <= '9'; c++ {
		t[c] = 1
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = 1, 1
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = 1
	}
	return t
}()

// plainValue accepts printable ASCII, spaces and tabs.
func plainValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// plainHost accepts a non-empty host[:port] of letters, digits and the
// punctuation of names and IP literals.
func plainHost(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_') {
			return false
		}
	}
	return true
}

// plainLength reads a Content-Length of 1 to 15 digits without a leading
// zero (or "0"): no sign, space, list or hex.
func plainLength(s string) (int64, bool) {
	if s == "" || len(s) > 15 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// asciiEqualFold compares s with a lower-case ASCII word.
func asciiEqualFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
