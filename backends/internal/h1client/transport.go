package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prefixgate/prefixgate/backends/donehook"
)

// Transport forwards requests with a known body length to http://
// backends over HTTP/1.1 keep-alive connections, doing the whole exchange
// on the caller's goroutine: the request line, headers and body go out in
// one write, and the response is read from the connection by whoever reads
// the body. net/http's Transport instead hands every request to a writer
// goroutine and every response from a reader goroutine that each
// connection keeps, and under load those hand-offs (channel sends, wake-ups,
// a select per request) were a fifth of the router's CPU (docs/benchmarks.md,
// "Overhead against HAProxy"). Anything it does not handle (an
// https:// URL, an unknown body length or one over 1 MiB, trailers) goes
// to fallback.
//
// What net/http's reader goroutine also gives, noticing that the backend
// closed an idle connection, is done by a non-blocking peek on a reused
// connection just before its request is written (writeAndAwait).
type Transport struct {
	// Fallback takes what the fast path does not.
	Fallback http.RoundTripper
	// Dial makes a new connection.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// HeaderTimeout bounds the wait for a response header once the
	// request is written (net/http's ResponseHeaderTimeout); 0: none.
	HeaderTimeout time.Duration
	// MaxIdlePerHost and IdleTimeout bound the idle connections kept, as
	// net/http's Transport's fields of those names do.
	MaxIdlePerHost int
	IdleTimeout    time.Duration
	// ReadBufferSize is each connection's read buffer.
	ReadBufferSize int
	// MaxResponseHeaderBytes limits the response header, as net/http's
	// Transport's field does; 0: DefaultMaxResponseHeaderBytes.
	MaxResponseHeaderBytes int64

	mu        sync.Mutex
	idle      map[string][]*backendConn // by host:port, most recently used last
	nextSweep time.Time
}

// backendConn is one backend connection and its read buffer.
type backendConn struct {
	t      *Transport
	host   string
	conn   net.Conn
	raw    syscall.RawConn // conn's, for alive and writeAndAwait; nil without one
	await  awaitState
	lim    limitReader
	br     *bufio.Reader
	idleAt time.Time
	reused bool
	// expire unblocks a write or read in progress on conn (a cancelled
	// request), made once per connection rather than once per request.
	expire func()
}

// awaitState is writeAndAwait's: the message, how much of it is written,
// and whether all of it is (then the wait has begun).
type awaitState struct {
	f       func(fd uintptr) bool
	msg     []byte
	n       int
	written bool
	// check: look for an end or stray bytes before writing (a reused
	// connection); closed: the look found them, and nothing was written.
	check, closed bool
}

// DefaultMaxResponseHeaderBytes is the response header limit when
// Transport.MaxResponseHeaderBytes is 0: net/http's Transport's default.
const DefaultMaxResponseHeaderBytes = 10 << 20

func (t *Transport) maxHeaderBytes() int64 {
	if t.MaxResponseHeaderBytes > 0 {
		return t.MaxResponseHeaderBytes
	}
	return DefaultMaxResponseHeaderBytes
}

// limitReader fails reads past n bytes while n >= 0; the response header
// is read under a limit, the body without one.
type limitReader struct {
	r net.Conn
	n int64
}

var errHeaderTooLarge = errors.New("response header is larger than the limit")

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// requestBuffers recycle the bytes of an outgoing request (line, headers,
// body) up to maxPooledRequest.
var requestBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooledRequest = 1 << 20

// handles reports whether the fast path can send req. Bodies over
// maxPooledRequest go to fallback, which streams them from the caller's
// buffer instead of copying them whole into the request's.
func (t *Transport) handles(req *http.Request) bool {
	return FastPath(req.URL, req.ContentLength) &&
		len(req.TransferEncoding) == 0 && req.Trailer == nil &&
		(req.ContentLength > 0 || req.Body == nil || req.Body == http.NoBody)
}

// FastPath reports whether a request to u with a body of n bytes, framed
// as Pool.Forward frames it, goes out on the fast path.
func FastPath(u *url.URL, n int64) bool {
	return u.Scheme == "http" && u.Host != "" && n >= 0 && n <= maxPooledRequest
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.Fallback.RoundTrip(req)
	}
	return t.send(req, nil, false)
}

// Forward sends req, which FastPath takes, with body as its body (copied
// into the message as it is, with no reader over it to allocate and read
// through). req.Header is sent as it is, but for the framing fields,
// Content-Encoding (the body is decoded) and, when there is a body,
// Content-Type, which is application/json (appendForwardHead); req.Body is
// not read. The caller may reuse body and req.Header once Forward returns.
func (t *Transport) Forward(req *http.Request, body []byte) (*http.Response, error) {
	return t.send(req, body, true)
}

// send sends req on the fast path, whose body is req.Body or, with
// direct, body (Forward's).
func (t *Transport) send(req *http.Request, body []byte, direct bool) (*http.Response, error) {
	bp := requestBuffers.Get().(*[]byte)
	defer func() {
		if cap(*bp) > maxPooledRequest {
			*bp = make([]byte, 0, 4<<10)
		}
		requestBuffers.Put(bp)
	}()
	var msg []byte
	var err error
	if direct {
		msg, err = appendForwardHead((*bp)[:0], req, body != nil)
		msg = append(msg, body...)
	} else {
		msg, err = appendRequest((*bp)[:0], req)
	}
	*bp = msg[:0]
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		resp, unsent, err := t.exchange(ctx, req, msg)
		// A request that provably never reached the backend (its reused
		// connection was found closed before a byte was written, or the
		// write failed with no byte of it taken) goes again on another
		// connection; one that may have reached it never does, since the
		// backend may have run it. The bound only guards against a loop:
		// each attempt takes another idle connection or dials.
		if unsent && attempt <= t.MaxIdlePerHost && ctx.Err() == nil {
			continue
		}
		if unsent && err != nil {
			err = notSentError{err}
		}
		return resp, err
	}
}

// ErrNotSent is wrapped by an error of Forward or RoundTrip when no byte
// of the request reached the backend (the dial failed, or every
// connection tried was closed before the request was written), so that
// a caller may send it elsewhere knowing the backend never ran it.
var ErrNotSent = errors.New("request not sent")

// notSentError marks err as ErrNotSent without changing its message.
type notSentError struct{ err error }

func (e notSentError) Error() string { return e.err.Error() }

func (e notSentError) Unwrap() []error { return []error{e.err, ErrNotSent} }

// ErrClosedOnReuse is wrapped by an error of Forward or RoundTrip when
// the backend ended a reused keep-alive connection without a byte of
// answer after the request was written to it: the backend closed the
// connection as the request went out (some servers, llama.cpp's among
// them, close it after every streamed answer while announcing
// keep-alive). It says nothing of the backend's health; the request may
// have reached it, so only a caller that accepts running it twice sends
// it again.
var ErrClosedOnReuse = errors.New("backend closed the reused connection without answering")

// closedOnReuseError marks err as ErrClosedOnReuse without changing its
// message.
type closedOnReuseError struct{ err error }

func (e closedOnReuseError) Error() string { return e.err.Error() }

func (e closedOnReuseError) Unwrap() []error { return []error{e.err, ErrClosedOnReuse} }

// endedSilently reports whether err, of reading a response header on c,
// is the connection's end (EOF or a reset) before any byte of it came.
func (c *backendConn) endedSilently(err error) bool {
	if c.lim.n != c.t.maxHeaderBytes() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// errClosedBeforeWrite: the reused connection had ended (or held stray
// bytes) before the request was written; nothing of it was sent.
var errClosedBeforeWrite = errors.New("backend closed the idle connection before the request was written")

// exchange sends msg, the bytes of req, on one connection and reads the
// response header. unsent reports that the request provably never
// reached the backend: no byte of it was written.
func (t *Transport) exchange(ctx context.Context, req *http.Request, msg []byte) (resp *http.Response, unsent bool, err error) {
	trace := httptrace.ContextClientTrace(ctx)
	c, err := t.conn(ctx, req.URL.Host)
	if err != nil {
		// A dial that failed sent nothing; trying again is the caller's
		// choice, so the loop in send does not.
		return nil, false, notSentError{err}
	}
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: c.conn, Reused: c.reused})
	}
	// Cancellation unblocks a write or read in progress by expiring the
	// connection's deadline; a connection that saw it is never reused.
	// The front door's contexts take the function themselves (donehook).
	hook := donehook.AfterFunc(ctx, c.expire)
	written, werr := c.write(ctx, msg, trace)
	if written == 0 && werr != nil {
		hook.Stop()
		c.conn.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, false, cerr
		}
		return nil, true, fmt.Errorf("writing the request: %w", werr)
	}
	resp, rerr := c.readResponse(req)
	if rerr != nil {
		hook.Stop()
		c.conn.Close()
		err := t.exchangeError(ctx, werr, rerr)
		if c.reused && werr == nil && ctx.Err() == nil && c.endedSilently(rerr) {
			err = closedOnReuseError{err}
		}
		return nil, false, err
	}
	c.keepDeadline(ctx, resp)
	keep := werr == nil && !resp.Close && !req.Close
	if resp.Body == http.NoBody {
		c.finish(&hook, keep)
		return resp, false, nil
	}
	var hb *responseBody
	var answer *simpleAnswer
	if lb, ok := resp.Body.(*lengthBody); ok && lb.answer != nil {
		answer = lb.answer
		hb = &answer.outer // allocated with the response
	} else {
		hb = new(responseBody)
	}
	*hb = responseBody{rc: resp.Body, c: c, ctx: ctx, hook: hook, keep: keep, answer: answer}
	resp.Body = hb
	return resp, false, nil
}

// write sends msg on c and starts the header timeout, reporting how many
// bytes went out. On a reused connection it first makes sure the backend
// has not closed it (errClosedBeforeWrite, nothing written). The request
// goes out and the wait for its answer begins in one step
// (writeAndAwait), under the header timeout; a trace that wants to hear
// of the write as it ends, and a write that does not finish at once, take
// the ordinary write, after which the header timeout starts.
func (c *backendConn) write(ctx context.Context, msg []byte, trace *httptrace.ClientTrace) (int, error) {
	sent := 0
	if trace == nil || trace.WroteRequest == nil {
		c.setHeaderDeadline(ctx)
		var closed bool
		sent, closed = c.writeAndAwait(msg, c.reused)
		if closed {
			return 0, errClosedBeforeWrite
		}
	} else if c.reused {
		c.setHeaderDeadline(ctx) // a deadline left expired would fail the look
		if !c.alive() {
			return 0, errClosedBeforeWrite
		}
	}
	if sent == len(msg) {
		return sent, nil
	}
	n, werr := c.conn.Write(msg[sent:])
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: werr})
	}
	// Even after a failed write the answer is read: a backend may answer
	// (a 413, say) and close before it has read the whole body.
	c.setHeaderDeadline(ctx)
	return sent + n, werr
}

// exchangeError is the error of an exchange whose response header could
// not be read: the context's when it ended, else what failed.
func (t *Transport) exchangeError(ctx context.Context, werr, rerr error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if werr != nil {
		return fmt.Errorf("writing the request: %w", werr)
	}
	var ne net.Error
	if errors.As(rerr, &ne) && ne.Timeout() {
		return fmt.Errorf("no response header within %s: %w", t.HeaderTimeout, rerr)
	}
	return fmt.Errorf("reading the response: %w", rerr)
}

// keepDeadline settles the header timeout's deadline once the header of
// resp is read.
func (c *backendConn) keepDeadline(ctx context.Context, resp *http.Response) {
	if c.t.HeaderTimeout <= 0 {
		return
	}
	if c.buffered(resp) {
		// No read of this answer waits: the header timeout's deadline
		// stays until the next exchange sets its own, one deadline call
		// per request instead of two.
		return
	}
	c.conn.SetReadDeadline(time.Time{})
	// A cancellation that expired the deadline between the header and
	// this line must not be undone: expire it again.
	if ctx.Err() != nil {
		c.conn.SetDeadline(time.Unix(1, 0))
	}
}

// buffered reports whether the body of resp, just read from c, is all in
// c's buffer (or empty): reading it will not wait for the backend.
func (c *backendConn) buffered(resp *http.Response) bool {
	if resp.Body == http.NoBody {
		return true
	}
	lb, ok := resp.Body.(*lengthBody)
	return ok && lb.n <= int64(c.br.Buffered())
}

// setHeaderDeadline starts the header timeout, if there is one, on c's
// reads. A cancellation that already expired the deadline (c.expire) is
// not undone: it expires it again.
func (c *backendConn) setHeaderDeadline(ctx context.Context) {
	if c.t.HeaderTimeout <= 0 {
		return
	}
	c.conn.SetReadDeadline(time.Now().Add(c.t.HeaderTimeout))
	if ctx.Err() != nil {
		c.expire()
	}
}

// readResponse reads the response header, skipping informational answers
// other than 101: the simple shape of a plain answer with the fast parser
// (response.go), anything else with http.ReadResponse.
func (c *backendConn) readResponse(req *http.Request) (*http.Response, error) {
	c.lim.n = c.t.maxHeaderBytes()
	for range 8 {
		resp, ok := readSimpleResponse(c.br, req)
		if ok {
			c.lim.n = -1
			return resp, nil
		}
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err // lim.n tells exchange whether anything came
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body.Close()
			return nil, errors.New("backend switched protocols (101), which a forwarded request never asks for")
		}
		if resp.StatusCode >= 200 {
			c.lim.n = -1
			return resp, nil
		}
		c.lim.n = c.t.maxHeaderBytes()
	}
	return nil, errors.New("more than 8 informational (1xx) responses")
}

// finish ends an exchange on c: the connection goes back to the idle set
// when keep holds and cancellation never touched it, else it is closed.
func (c *backendConn) finish(hook *donehook.Stop, keep bool) {
	if !hook.Stop() {
		keep = false // the AfterFunc ran or is running: the deadline is spent
	}
	if keep && c.br.Buffered() == 0 {
		c.t.put(c)
		return
	}
	c.conn.Close()
}

// responseBody is a response body on an backendConn. Reading it to the end returns
// the connection to the idle set; closing it early closes the connection
// (Close may come from another goroutine, to unblock a Read).
type responseBody struct {
	rc   io.ReadCloser
	c    *backendConn
	ctx  context.Context
	hook donehook.Stop
	keep bool
	// answer holds the objects of a simple answer, the idle timeout's
	// wrapper (NewIdleBody) among them; nil for another answer.
	answer *simpleAnswer

	mu   sync.Mutex
	done bool
}

func (b *responseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.end(err == io.EOF)
		if cerr := b.ctx.Err(); err != io.EOF && cerr != nil {
			// The read failed on the deadline cancellation set: say why,
			// as net/http's Transport does.
			err = cerr
		}
	}
	return n, err
}

func (b *responseBody) Close() error {
	b.end(false)
	return nil
}

// readyNow reports whether the next Read returns without waiting for the
// backend: a body of known length whose next bytes (or end) are in the
// connection's buffer. Called on the reading goroutine only.
func (b *responseBody) readyNow() bool {
	lb, ok := b.rc.(*lengthBody)
	return ok && (lb.n <= 0 || lb.br.Buffered() > 0)
}

// end releases the connection once: kept when the body was read to its
// end, closed otherwise.
func (b *responseBody) end(eof bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	if eof {
		b.c.finish(&b.hook, b.keep)
		return
	}
	b.hook.Stop()
	b.c.conn.Close()
}

// conn returns an idle connection to host that the backend has not
// closed, or dials a new one.
func (t *Transport) conn(ctx context.Context, host string) (*backendConn, error) {
	now := time.Now()
	for {
		t.mu.Lock()
		list := t.idle[host]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[host] = list[:len(list)-1]
		t.mu.Unlock()
		if now.Sub(c.idleAt) < t.IdleTimeout {
			c.reused = true
			return c, nil
		}
		c.conn.Close()
	}
	nc, err := t.Dial(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	c := &backendConn{t: t, host: host, conn: nc, raw: rawConnOf(nc), lim: limitReader{r: nc, n: -1}}
	c.expire = func() { c.conn.SetDeadline(time.Unix(1, 0)) }
	c.br = bufio.NewReaderSize(&c.lim, t.ReadBufferSize)
	return c, nil
}

// put returns c to the idle set, within the per-host bound, and now and
// then closes connections idle past the timeout (those of backends that
// have gone included).
func (t *Transport) put(c *backendConn) {
	now := time.Now()
	c.idleAt = now
	var stale []*backendConn
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string][]*backendConn)
	}
	list := t.idle[c.host]
	if len(list) >= t.MaxIdlePerHost {
		stale = append(stale, list[0])
		list = append(list[:0], list[1:]...)
	}
	t.idle[c.host] = append(list, c)
	if now.After(t.nextSweep) {
		t.nextSweep = now.Add(t.IdleTimeout / 4)
		for h, l := range t.idle {
			keep := l[:0]
			for _, ic := range l {
				if now.Sub(ic.idleAt) >= t.IdleTimeout {
					stale = append(stale, ic)
				} else {
					keep = append(keep, ic)
				}
			}
			clear(l[len(keep):])
			if len(keep) == 0 {
				delete(t.idle, h)
			} else {
				t.idle[h] = keep
			}
		}
	}
	t.mu.Unlock()
	for _, ic := range stale {
		ic.conn.Close()
	}
}

// CloseIdleConnections closes every idle connection.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, l := range idle {
		for _, c := range l {
			c.conn.Close()
		}
	}
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// appendRequest appends req as HTTP/1.1 bytes (request line, headers,
// body of exactly req.ContentLength bytes) to dst. It refuses header names
// and values that would change the message's framing.
func appendRequest(dst []byte, req *http.Request) ([]byte, error) {
	dst, err := appendHead(dst, req)
	if err != nil || req.ContentLength == 0 {
		return dst, err
	}
	n := int(req.ContentLength)
	start := len(dst)
	// Grow without zeroing what the body is read over at once.
	dst = slices.Grow(dst, n)[:start+n]
	got, err := io.ReadFull(req.Body, dst[start:])
	if err != nil {
		return dst, fmt.Errorf("request body: %d of its %d bytes: %w", got, n, err)
	}
	var extra [1]byte
	if m, _ := req.Body.Read(extra[:]); m > 0 {
		return dst, fmt.Errorf("request body is longer than its ContentLength of %d bytes", n)
	}
	if err := req.Body.Close(); err != nil {
		return dst, fmt.Errorf("request body: %w", err)
	}
	return dst, nil
}

// appendHead appends req's request line and headers, through the blank
// line, announcing req.ContentLength bytes of body.
func appendHead(dst []byte, req *http.Request) ([]byte, error) {
	return appendHeadAs(dst, req, false, false)
}

// appendForwardHead is appendHead for Pool.Forward, whose caller's
// headers are req.Header as they are, not a copy made to edit: their
// Content-Encoding is left out (the body is decoded), and with json their
// Content-Type too, for "Content-Type: application/json".
func appendForwardHead(dst []byte, req *http.Request, json bool) ([]byte, error) {
	return appendHeadAs(dst, req, true, json)
}

func appendHeadAs(dst []byte, req *http.Request, forward, json bool) ([]byte, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !ValidToken(method) {
		return dst, fmt.Errorf("invalid method %q", method)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !validValue(host) {
		return dst, fmt.Errorf("invalid Host %q", host)
	}
	uri := req.URL.RequestURI()
	for i := 0; i < len(uri); i++ {
		if uri[i] <= ' ' || uri[i] == 0x7f {
			return dst, fmt.Errorf("invalid request target %q", uri)
		}
	}
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, uri...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\n"...)
	if _, ok := req.Header["User-Agent"]; !ok {
		dst = append(dst, "User-Agent: Go-http-client/1.1\r\n"...)
	}
	if req.ContentLength > 0 || (method != http.MethodGet && method != http.MethodHead) {
		dst = append(dst, "Content-Length: "...)
		dst = strconv.AppendInt(dst, req.ContentLength, 10)
		dst = append(dst, "\r\n"...)
	}
	if req.Close {
		dst = append(dst, "Connection: close\r\n"...)
	}
	if json {
		dst = append(dst, "Content-Type: application/json\r\n"...)
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			continue // the framing is this function's
		case "Content-Encoding":
			if forward {
				continue
			}
		case "Content-Type":
			if json {
				continue
			}
		}
		if !ValidToken(k) {
			return dst, fmt.Errorf("invalid header name %q", k)
		}
		for _, v := range vs {
			if !validValue(v) {
				return dst, fmt.Errorf("invalid value for header %s", k)
			}
			dst = append(dst, k...)
			dst = append(dst, ": "...)
			dst = append(dst, v...)
			dst = append(dst, "\r\n"...)
		}
	}
	return append(dst, "\r\n"...), nil
}

// ValidToken reports whether s is an HTTP token (a method or header name).
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == ':' || c == '(' || c == ')' || c == ',' || c == '/' ||
			c == ';' || c == '<' || c == '=' || c == '>' || c == '?' || c == '@' || c == '[' ||
			c == '\\' || c == ']' || c == '{' || c == '}' || c == '"' {
			return false
		}
	}
	return true
}

// validValue reports whether s can be a header value: no control bytes
// but tab, so no CR or LF that would end the header early.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
