package h1front

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// requestBody is a plain request's body: its Content-Length bytes, first from
// the connection's buffer, then straight from the connection.
type requestBody struct {
	c    *clientConn
	ctx  *requestContext // the request's, for the watch; nil when discarding
	left int64
	read bool // reached its end
	done bool // the handler returned
	err  error
}

var errBodyAfterHandler = errors.New("http: invalid Read on closed Body")

func (b *requestBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errBodyAfterHandler
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	c := b.c
	var n int
	if c.start < len(c.in) {
		n = copy(p, c.in[c.start:])
		c.start += n
		c.dropDrainedBig()
	} else {
		c.dropDrainedBig()
		var err error
		n, err = c.nc.Read(p)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.left -= int64(n)
			b.err = err
			return n, err
		}
	}
	b.left -= int64(n)
	if b.left == 0 {
		if !b.read {
			b.read = true
			if b.ctx != nil {
				c.arm(b.ctx)
			}
		}
		return n, io.EOF
	}
	return n, nil
}

// Close leaves the unread rest to serveRequest (dropped or closing).
func (b *requestBody) Close() error { return nil }

// responseWriter writes one answer on the connection.
type responseWriter struct {
	c      *clientConn
	r      *http.Request
	body   *requestBody
	header http.Header
	ctx    *requestContext // the request's, ended by a failed write

	status     int   // 0 until WriteHeader
	cl         int64 // the declared Content-Length, or -1
	written    int64
	committed  bool // the head is in c.out
	chunked    bool
	hold       []byte // body bytes before the head is committed
	closeAfter bool
	err        error
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.status != 0 {
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		// An informational answer goes out at once; the final one follows.
		w.c.out = appendStatusLine(w.c.out, code)
		w.c.out = appendHeader(w.c.out, w.header)
		w.c.out = append(w.c.out, "\r\n"...)
		w.flushOut()
		return
	}
	w.status = code
	// The name is canonical: looked up as it is, without Get's
	// canonicalization.
	if v := headerValue(w.header, "Content-Length"); v != "" {
		if cl, err := strconv.ParseInt(v, 10, 64); err == nil && cl >= 0 {
			w.cl = cl
		} else {
			w.header.Del("Content-Length")
		}
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.committed {
		if w.cl < 0 && len(w.hold)+len(p) <= h1HoldBody {
			w.hold = append(w.hold, p...)
			return len(p), nil
		}
		first := p
		if len(w.hold) > 0 {
			first = w.hold
		}
		w.commit(w.cl < 0, first)
		if w.chunked && len(w.hold) > 0 {
			w.emitChunk(w.hold)
		}
		w.hold = nil
	}
	if w.chunked {
		w.emitChunk(p)
	} else {
		w.emit(p)
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// Flush sends what is written so far; an answer without a length becomes
// chunked.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush for http.ResponseController.
func (w *responseWriter) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(w.cl < 0 && bodyAllowed(w.status), w.hold)
		if w.chunked && len(w.hold) > 0 {
			w.emitChunk(w.hold)
		} else if !w.chunked {
			w.emit(w.hold)
		}
		w.hold = nil
	}
	w.flushOut()
	return w.err
}

// SetReadDeadline and SetWriteDeadline serve http.ResponseController.
func (w *responseWriter) SetReadDeadline(t time.Time) error {
	c := w.c
	c.wmu.Lock() // against a watch clearing a stale deadline
	defer c.wmu.Unlock()
	c.deadline, c.stale = true, false // cleared before the next request's head
	return c.nc.SetReadDeadline(t)
}

func (w *responseWriter) SetWriteDeadline(t time.Time) error {
	w.c.writeDeadline = true // cleared after the request
	return w.c.nc.SetWriteDeadline(t)
}

// EnableFullDuplex: the body is read from the connection as the handler
// asks, before or after the answer is written.
func (w *responseWriter) EnableFullDuplex() error { return nil }

// finish completes the answer after the handler; false means the
// connection must close.
func (w *responseWriter) finish() bool {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		if w.cl < 0 && bodyAllowed(w.status) {
			w.cl = int64(len(w.hold))
			w.header["Content-Length"] = []string{strconv.Itoa(len(w.hold))}
		}
		w.commit(false, w.hold)
		w.emit(w.hold)
		w.hold = nil
	}
	if w.chunked {
		w.c.out = append(w.c.out, "0\r\n\r\n"...)
	}
	w.flushOut()
	if w.cl >= 0 && w.written < w.cl && bodyAllowed(w.status) {
		return false // the client waits for bytes that will not come
	}
	return w.err == nil
}

// commit puts the status line and header in c.out. first is the body's
// first bytes, for Content-Type sniffing.
func (w *responseWriter) commit(chunked bool, first []byte) {
	w.committed, w.chunked = true, chunked
	c := w.c
	// The request's body, if the handler left it unread, is dropped now
	// or the connection closes after the answer, as with net/http.
	if !w.body.read && w.body.left > h1DiscardBody {
		w.closeAfter = true
	}
	if w.r.Close || c.f.isShutting() || hasToken(w.header["Connection"], "close") {
		w.closeAfter = true
	}
	w.keepFraming(chunked)
	out := appendStatusLine(c.out, w.status)
	out = appendHeader(out, w.header)
	if _, ok := w.header["Date"]; !ok {
		out = append(out, "Date: "...)
		out = append(out, c.httpDate()...)
		out = append(out, "\r\n"...)
	}
	if _, ok := w.header["Content-Type"]; !ok && len(first) > 0 && bodyAllowed(w.status) {
		out = append(out, "Content-Type: "...)
		out = append(out, http.DetectContentType(first)...)
		out = append(out, "\r\n"...)
	}
	if chunked {
		out = append(out, "Transfer-Encoding: chunked\r\n"...)
	}
	if w.closeAfter && !hasToken(w.header["Connection"], "close") {
		out = append(out, "Connection: close\r\n"...)
	}
	c.out = append(out, "\r\n"...)
}

// keepFraming makes the header's framing fields say what the answer's
// bytes will be: its Content-Length is the one WriteHeader took (or the
// held body's), chunked answers and answers without a body have none, and
// the handler's own Transfer-Encoding goes. A field the handler changed
// after WriteHeader, or left on a 204, would otherwise reach the client
// beside a framing that disagrees with it, and the client would read the
// next answer as this one's body or wait for bytes that never come.
// net/http's server also decides the framing itself.
func (w *responseWriter) keepFraming(chunked bool) {
	h := w.header
	if _, ok := h["Transfer-Encoding"]; ok {
		delete(h, "Transfer-Encoding")
	}
	vs, has := h["Content-Length"]
	if chunked || w.cl < 0 || !bodyAllowed(w.status) {
		if has {
			delete(h, "Content-Length")
		}
		return
	}
	var digits [20]byte
	want := strconv.AppendInt(digits[:0], w.cl, 10)
	if len(vs) != 1 || vs[0] != string(want) {
		h["Content-Length"] = []string{string(want)}
	}
}

func (f *Front) isShutting() bool { return f.shutting.Load() }

// emit queues p after c.out, writing both in one writev when they pass
// the buffer.
func (w *responseWriter) emit(p []byte) {
	c := w.c
	if len(c.out)+len(p) <= h1OutBuffer {
		c.out = append(c.out, p...)
		return
	}
	if w.err == nil {
		bufs := net.Buffers{c.out, p}
		if _, err := bufs.WriteTo(c.nc); err != nil {
			w.fail(err)
		}
	}
	c.out = c.out[:0]
}

// emitChunk queues p as one chunk.
func (w *responseWriter) emitChunk(p []byte) {
	if len(p) == 0 {
		return
	}
	w.c.out = strconv.AppendInt(w.c.out, int64(len(p)), 16)
	w.c.out = append(w.c.out, "\r\n"...)
	w.emit(p)
	w.c.out = append(w.c.out, "\r\n"...)
}

// flushOut writes c.out.
func (w *responseWriter) flushOut() {
	c := w.c
	if len(c.out) > 0 && w.err == nil {
		if _, err := c.nc.Write(c.out); err != nil {
			w.fail(err)
		}
	}
	c.out = c.out[:0]
}

// fail records a write error: the client is gone, so the request's
// context ends, as net/http's does.
func (w *responseWriter) fail(err error) {
	w.err = err
	w.ctx.cancelRequest()
}

// headerValue is h.Get(key) for a key already in canonical form.
func headerValue(h http.Header, key string) string {
	if vs := h[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// hasToken reports whether a Connection header lists tok.
func hasToken(vs []string, tok string) bool {
	for _, v := range vs {
		for len(v) > 0 {
			var item string
			item, v, _ = cutByte(v, ',')
			if asciiEqualFold(trimOWS(item), tok) {
				return true
			}
		}
	}
	return false
}

func cutByte(s string, c byte) (before, after string, found bool) {
	if i := strings.IndexByte(s, c); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

func appendStatusLine(b []byte, code int) []byte {
	if code == http.StatusOK {
		return append(b, "HTTP/1.1 200 OK\r\n"...)
	}
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	if text := http.StatusText(code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

// appendHeader writes h's fields as net/http's server does: a name that
// is not a token is left out, and CR and LF in a value become spaces, so
// that no value can end the header or add a field.
func appendHeader(b []byte, h http.Header) []byte {
	for k, vs := range h {
		if !plainToken(k) || k == "" {
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			start := len(b)
			b = append(b, trimOWS(v)...)
			for i := start; i < len(b); i++ {
				if b[i] == '\r' || b[i] == '\n' {
					b[i] = ' '
				}
			}
			b = append(b, "\r\n"...)
		}
	}
	return b
}

// httpDate is the Date header's value, formatted once a second.
func (c *clientConn) httpDate() []byte {
	now := time.Now()
	if sec := now.Unix(); sec != c.dateSec || c.date == nil {
		c.dateSec = sec
		c.date = now.UTC().AppendFormat(c.date[:0], http.TimeFormat)
	}
	return c.date
}
