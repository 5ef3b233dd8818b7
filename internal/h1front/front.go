package h1front

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// h1ReadBuffer holds a request head (a larger head goes to net/http)
	// and the first bytes of its body; the rest of a longer body is read
	// straight into the handler's buffer, so a larger one would save a
	// read only when a whole longer request has already arrived. Each
	// connection holds one for its life, as net/http holds its
	// bufio.Reader.
	h1ReadBuffer = 8 << 10
	// h1BigRead: a connection whose last request did not fit h1ReadBuffer
	// reads its next one into a pooled buffer this large, taken only once
	// bytes have arrived (readBig): a 16 KiB request then takes one read,
	// not two, and an idle connection still holds h1ReadBuffer only.
	h1BigRead = 64 << 10
	// h1OutBuffer: response bytes are gathered up to this much, then
	// written together with the next write in one writev.
	h1OutBuffer = 32 << 10
	// h1HoldBody: an answer without Content-Length that is finished
	// within this many bytes and never flushed is sent with its length;
	// longer or flushed answers are chunked (net/http's rule and size).
	h1HoldBody = 2048
	// h1DiscardBody: after the handler, an unread rest of the request
	// body up to this size is read and dropped to keep the connection;
	// a longer one closes it (net/http's bound).
	h1DiscardBody = 256 << 10
	// h1WatchDelay: a request still running this long after its body
	// was read gets a background read that cancels its context when the
	// client hangs up. Shorter requests skip the read and its wake-ups.
	h1WatchDelay = 10 * time.Millisecond
	// h1CloseDelay: how long a connection closing over an unread request
	// body drains it after half-closing, for the client to read the
	// answer (net/http's rstAvoidanceDelay).
	h1CloseDelay = 500 * time.Millisecond
)

// Front accepts from the real listener and serves plain HTTP/1.1
// connections; it is also the listener (Accept, Close, Addr) that
// net/http's server serves the handed-over connections from.
type Front struct {
	cfg           Config
	ln            net.Listener
	headerTimeout time.Duration

	handoff chan net.Conn // fresh connections and TLS ones
	// continued takes connections that have spoken HTTP/1.1 here, when a
	// server serves Continued.
	continued    chan net.Conn
	hasContinued atomic.Bool
	closed       chan struct{}
	closeOnce    sync.Once

	mu    sync.Mutex
	conns map[*clientConn]struct{} // served here
	// shutting, and each connection's idle flag, are atomics rather than
	// under mu: every request sets its connection idle and busy again and
	// reads shutting, and a mutex and map shared by all connections was
	// work (and contention) on each.
	shutting atomic.Bool
	left     sync.WaitGroup // one per connection served here
}

// Config is what the front door needs from the server it fronts.
type Config struct {
	// Handler serves the plain requests; it should be the handler of the
	// net/http server the front door hands connections to.
	Handler http.Handler
	// Log takes a handler's panic; nil discards it.
	Log *slog.Logger
	// HeaderTimeout bounds the wait for a request's head once it has
	// begun, and for a new connection's first head (net/http's
	// ReadHeaderTimeout, which the server must share).
	HeaderTimeout time.Duration
	// ClientIdleTimeout bounds the wait for a connection's next request
	// (net/http's IdleTimeout); 0: none.
	ClientIdleTimeout time.Duration
	// MaxBodyBytes: a request with a longer declared body goes to
	// net/http, for its 413 and lingering close.
	MaxBodyBytes int64
	// Requests and Handovers, when set, count the requests served here
	// and the connections handed to net/http.
	Requests, Handovers Counter
}

// Counter is a metric the front door adds to (a Prometheus counter).
type Counter interface{ Inc() }

// New returns a front door accepting from ln; Run serves it.
func New(ln net.Listener, cfg Config) *Front {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Front{cfg: cfg, ln: ln, headerTimeout: cfg.HeaderTimeout, handoff: make(chan net.Conn),
		continued: make(chan net.Conn), closed: make(chan struct{}), conns: map[*clientConn]struct{}{}}
}

// Accept yields a handed-over connection to net/http.
func (f *Front) Accept() (net.Conn, error) {
	select {
	case c := <-f.handoff:
		return c, nil
	case <-f.closed:
		return nil, net.ErrClosed
	}
}

// Continued is the listener of the connections handed over after they
// have spoken HTTP/1.1 here: the net/http server that serves it must
// speak HTTP/1.1 only, since HTTP/2's preface may only start a
// connection (RFC 9113, 3.4), and net/http looks for it at the start of
// every connection it is given. Until Continued is called, those
// connections go to Accept too.
func (f *Front) Continued() net.Listener {
	f.hasContinued.Store(true)
	return continuedListener{f}
}

type continuedListener struct{ f *Front }

func (l continuedListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.f.continued:
		return c, nil
	case <-l.f.closed:
		return nil, net.ErrClosed
	}
}

func (l continuedListener) Close() error   { return l.f.Close() }
func (l continuedListener) Addr() net.Addr { return l.f.Addr() }

// Close stops accepting (net/http's Shutdown calls it).
func (f *Front) Close() error {
	var err error
	f.closeOnce.Do(func() {
		close(f.closed)
		err = f.ln.Close()
	})
	return err
}

// Addr is the real listener's address.
func (f *Front) Addr() net.Addr { return f.ln.Addr() }

// Run accepts until the listener is closed; a temporary error (out of
// file descriptors) is retried after a growing pause, as net/http does.
func (f *Front) Run() error {
	var pause time.Duration
	for {
		c, err := f.ln.Accept()
		if err != nil {
			select {
			case <-f.closed:
				return nil
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Temporary() { //nolint:staticcheck // net/http's test for a retryable accept
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				time.Sleep(pause)
				continue
			}
			return err
		}
		pause = 0
		if _, ok := c.(*tls.Conn); ok {
			f.give(c, false) // net/http does the handshake and ALPN
			continue
		}
		f.left.Add(1) // before wait can begin: run has returned by then
		go f.serve(c)
	}
}

// give hands c to net/http, or closes it once the server is closed;
// continued says it has spoken HTTP/1.1 here.
func (f *Front) give(c net.Conn, continued bool) {
	if f.cfg.Handovers != nil {
		f.cfg.Handovers.Inc()
	}
	to := f.handoff
	if continued && f.hasContinued.Load() {
		to = f.continued
	}
	select {
	case to <- c:
	case <-f.closed:
		_ = c.Close()
	}
}

// Shutdown closes idle connections and makes active ones close after
// their current answer; Wait then waits for them.
func (f *Front) Shutdown() {
	// Stored before the idle flags are read, as setIdle stores the flag
	// before it reads shutting: of a connection going idle now, at least
	// one side sees the other and the connection closes.
	f.shutting.Store(true)
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		if c.idle.Load() {
			_ = c.nc.Close()
		}
	}
}

// Wait returns once every connection served here has ended, or with
// ctx's error.
func (f *Front) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { f.left.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		for c := range f.conns {
			_ = c.nc.Close()
		}
		f.mu.Unlock()
		return ctx.Err()
	}
}

// setIdle records whether c waits for a request with no byte of it read;
// it reports false when the server is shutting down and an idle c should
// close.
func (f *Front) setIdle(c *clientConn, idle bool) bool {
	c.idle.Store(idle)
	return !idle || !f.shutting.Load()
}

// add records c as served here.
func (f *Front) add(c *clientConn) {
	f.mu.Lock()
	f.conns[c] = struct{}{}
	f.mu.Unlock()
}

// clientConn is one connection served here.
type clientConn struct {
	f      *Front
	nc     net.Conn
	remote string
	// in holds read bytes; in[start:] are not consumed yet. It lies in
	// own, the connection's buffer, or in big, a pooled h1BigRead buffer
	// (while it holds more than own could).
	in    []byte
	start int
	own   []byte
	big   *[]byte
	// bigReads: the last request's head and body were more than own
	// holds, so the next idle read goes to a pooled big buffer.
	bigReads bool
	raw      syscall.RawConn // nc's, for readBig; nil without one
	// readBig's function and results.
	bigStep func(fd uintptr) bool
	bigN    int
	bigErr  error
	out     []byte // response bytes not yet written; from outBuffers during a request
	// deadline is set while a read deadline is in force on nc; idleWait
	// while that deadline is the client idle timeout (between requests)
	// rather than the header timeout; served once a request has been.
	deadline   bool
	deadlineAt time.Time // the deadline in force, while deadline
	idleWait   bool
	served     bool
	// afterPost: how many more CR or LF bytes before the next request
	// are dropped, as net/http's server drops up to four after a POST
	// for old clients that end its body with one.
	afterPost int
	// writeDeadline: the handler set one (http.ResponseController); it
	// ends with its request, as net/http's server clears it.
	writeDeadline bool
	// stale: the deadline in force is the one the last head was read
	// under, left in place because its request was read whole with it
	// and no read of the connection waits during the request (saving a
	// deadline call per request); the next read sets or clears it, and
	// the watch clears it before its read. Under wmu while a watch may
	// run.
	stale bool
	// date caches the Date header's value for dateSec.
	dateSec int64
	date    []byte

	// The background read of a request that runs long (watch).
	wmu      sync.Mutex
	wstate   int // watchOff, watchArmed, watchReading
	wtimer   *time.Timer
	wctx     *requestContext
	wdone    chan struct{}
	wbyte    [1]byte
	wn       int
	werr     error
	aborting bool
	// The request timeout's timer (context.go), armed for dctx.
	dtimer *time.Timer
	dctx   *requestContext
	// unreadBody: the connection closes after an answer that left some of
	// its request's body unread (closeWriteAndWait).
	unreadBody bool
	// idle: c waits for a request with no byte of it read (setIdle).
	idle atomic.Bool
}

const (
	watchOff = iota
	watchArmed
	watchReading
)

// serve runs c's requests until it closes or goes to net/http.
func (f *Front) serve(nc net.Conn) {
	c := &clientConn{f: f, nc: nc, own: make([]byte, 0, h1ReadBuffer)}
	c.in = c.own
	defer f.left.Done()
	f.add(c)
	handed := false
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		if c.wtimer != nil {
			c.wtimer.Stop()
		}
		if c.dtimer != nil {
			c.dtimer.Stop()
		}
		if !handed {
			_ = nc.Close()
		}
		c.releaseBig()
	}()
	c.remote = nc.RemoteAddr().String()
	c.raw = rawConnOf(nc)
	// The first request's head must arrive within the timeout from the
	// accept, as with net/http's ReadHeaderTimeout.
	c.setDeadline(time.Now().Add(f.headerTimeout))
	for {
		h, n, v, err := c.readHead()
		if err != nil {
			return
		}
		if v == headOther {
			handed = true
			c.handOver()
			return
		}
		keep := c.serveRequest(h, n)
		if c.writeDeadline {
			_ = c.nc.SetWriteDeadline(time.Time{})
			c.writeDeadline = false
		}
		if !keep {
			if c.unreadBody {
				c.closeWriteAndWait()
			}
			return
		}
		c.served = true
		c.afterPost = 0
		if h.method == http.MethodPost {
			c.afterPost = 4
		}
		if c.deadline && !c.stale { // the handler set one (http.ResponseController)
			c.setDeadline(time.Time{})
		}
	}
}

// closeWriteAndWait half-closes the connection after an answer that left
// some of the request's body unread, then reads and drops what the client
// still sends until it closes or h1CloseDelay has passed. Closing at once
// over unread bytes makes the kernel reset the connection, and a client
// still sending its body can lose the answer to the reset; net/http's
// server half-closes and waits as long for the same reason.
func (c *clientConn) closeWriteAndWait() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(h1CloseDelay))
	buf := c.in[:cap(c.in)]
	if len(buf) == 0 {
		buf = make([]byte, 4<<10)
	}
	for {
		if _, err := c.nc.Read(buf); err != nil {
			return
		}
	}
}

// setDeadline sets nc's read deadline; the zero time clears it.
func (c *clientConn) setDeadline(t time.Time) {
	_ = c.nc.SetReadDeadline(t)
	c.deadline, c.deadlineAt = !t.IsZero(), t
	c.stale = false
}

// readHead reads until in[start:] starts with a complete plain head or
// is known not to be plain. A head that has begun must be complete within
// the header timeout; a next request must begin within the client idle
// timeout, as with net/http's server's IdleTimeout.
func (c *clientConn) readHead() (plainHead, int, headVerdict, error) {
	for {
		if c.afterPost > 0 {
			c.dropLeadingCRLF()
		}
		if c.start < len(c.in) {
			h, n, v := parsePlainHead(c.in[c.start:], c.f.cfg.MaxBodyBytes)
			if v == headPlain && n > h1ReadBuffer {
				// A head is plain within h1ReadBuffer bytes, whichever
				// buffer it was read into.
				v = headOther
			}
			if v != headMore {
				if v == headPlain {
					c.bigReads = int64(n)+h.contentLength > h1ReadBuffer
				}
				if c.deadline && v == headPlain {
					if int64(n)+h.contentLength <= int64(len(c.in)-c.start) {
						c.stale = true // the request is here whole
					} else {
						c.setDeadline(time.Time{})
					}
					c.idleWait = false
				}
				return h, n, v, nil
			}
		}
		if c.start > 0 {
			c.in = c.in[:copy(c.in, c.in[c.start:])]
			c.start = 0
		}
		if c.big != nil && len(c.in) <= cap(c.own) {
			// What is left fits the connection's own buffer again.
			c.in = append(c.own[:0], c.in...)
			c.releaseBig()
		}
		if len(c.in) >= h1ReadBuffer {
			return plainHead{}, 0, headOther, nil // a head larger than the buffer
		}
		idle := len(c.in) == 0
		switch {
		case idle && c.served && (!c.deadline || c.stale) && c.f.cfg.ClientIdleTimeout > 0:
			c.setDeadline(time.Now().Add(c.f.cfg.ClientIdleTimeout))
			c.idleWait = true
		case !idle && (!c.deadline || c.idleWait || c.stale):
			c.setDeadline(time.Now().Add(c.f.headerTimeout))
			c.idleWait = false
		case c.stale: // an idle wait without a timeout
			c.setDeadline(time.Time{})
		}
		if idle && !c.f.setIdle(c, true) {
			return plainHead{}, 0, headOther, net.ErrClosed
		}
		var m int
		var err error
		if idle && c.bigReads && c.raw != nil {
			m, err = c.readBig()
		} else {
			m, err = c.nc.Read(c.in[len(c.in):cap(c.in)])
			c.in = c.in[:len(c.in)+m]
		}
		if idle && !c.f.setIdle(c, false) {
			return plainHead{}, 0, headOther, net.ErrClosed
		}
		if err != nil && m == 0 {
			return plainHead{}, 0, headOther, err
		}
	}
}

// dropLeadingCRLF drops the CR and LF bytes that begin the next request,
// within afterPost's allowance.
func (c *clientConn) dropLeadingCRLF() {
	for c.afterPost > 0 && c.start < len(c.in) {
		if b := c.in[c.start]; b != '\r' && b != '\n' {
			c.afterPost = 0
			return
		}
		c.start++
		c.afterPost--
	}
}

// bigBuffers are the pooled buffers of readBig.
var bigBuffers = sync.Pool{New: func() any { b := make([]byte, h1BigRead); return &b }}

// readBig reads into a pooled big buffer, which becomes c.in's, taken
// only for a read that finds bytes: while the connection waits, it holds
// no big buffer. c.in must be empty.
func (c *clientConn) readBig() (int, error) {
	// The function and its results live in c, made once per connection:
	// a closure over locals would be three allocations per request.
	if c.bigStep == nil {
		c.bigStep = c.readBigStep
	}
	c.bigN, c.bigErr = 0, nil
	if err := c.raw.Read(c.bigStep); err != nil {
		return 0, err
	}
	return c.bigN, c.bigErr
}

// readBigStep is readBig's function for RawConn.Read: one read into a
// pooled buffer, kept when it found bytes.
func (c *clientConn) readBigStep(fd uintptr) bool {
	bp := bigBuffers.Get().(*[]byte)
	for {
		m, err := readFD(fd, *bp)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			bigBuffers.Put(bp)
			return false // wait for bytes
		case err != nil:
			c.bigErr = err
		case m == 0:
			c.bigErr = io.EOF
		default:
			c.releaseBig() // none while idle; kept from leaking if ever
			c.bigN, c.big, c.in, c.start = m, bp, (*bp)[:m], 0
			return true
		}
		bigBuffers.Put(bp)
		return true
	}
}

// dropDrainedBig gives back the big buffer once every byte read into it
// is consumed, before a body read waits for the client: a body has no
// read deadline, and a client sending it slowly (or not at all) would
// otherwise pin a 64 KiB buffer per connection for as long as it likes
// (TestFrontSlowBodyPinsNoBigBuffer).
func (c *clientConn) dropDrainedBig() {
	if c.big != nil && c.start == len(c.in) {
		c.in, c.start = c.own[:0], 0
		c.releaseBig()
	}
}

// releaseBig returns the pooled buffer, once c.in no longer lies in it.
func (c *clientConn) releaseBig() {
	if c.big != nil {
		bigBuffers.Put(c.big)
		c.big = nil
	}
}

// handOver gives the connection, with its unread bytes, to net/http, with
// what it has been through here: a head that began here keeps its
// deadline, and a connection that has spoken HTTP/1.1 goes to Continued.
func (c *clientConn) handOver() {
	c.f.mu.Lock()
	delete(c.f.conns, c)
	c.f.mu.Unlock()
	// A copy, so that the read buffer is not kept for the connection's
	// life by the slice.
	pending := bytes.Clone(c.in[c.start:])
	c.in = nil
	c.releaseBig()
	var head time.Time
	if c.deadline && !c.stale && !c.idleWait {
		head = c.deadlineAt // the header timeout counts from the head's start here
	}
	if len(pending) == 0 && head.IsZero() {
		c.f.give(c.nc, c.served)
		return
	}
	c.f.give(&prefixedConn{Conn: c.nc, pending: pending, headDeadline: head}, c.served)
}

// prefixedConn reads pending before the connection's own bytes. Its
// first read deadline, net/http's header timeout counted from the
// handover, is held to headDeadline, when set.
type prefixedConn struct {
	net.Conn
	pending []byte

	mu           sync.Mutex
	headDeadline time.Time
}

func (p *prefixedConn) SetReadDeadline(t time.Time) error {
	p.mu.Lock()
	if hd := p.headDeadline; !hd.IsZero() {
		if t.IsZero() || t.After(hd) {
			t = hd
		}
		p.headDeadline = time.Time{}
	}
	p.mu.Unlock()
	return p.Conn.SetReadDeadline(t)
}

// CloseWrite lets net/http half-close before closing after an error
// answer (a 431, say), so that the client reads it instead of a reset.
func (p *prefixedConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return p.Conn.Close()
}

func (p *prefixedConn) Read(b []byte) (int, error) {
	if len(p.pending) > 0 {
		n := copy(b, p.pending)
		p.pending = p.pending[n:]
		if len(p.pending) == 0 {
			p.pending = nil
		}
		return n, nil
	}
	return p.Conn.Read(b)
}

// serveRequest runs the handler for the head in in[start:start+n] and
// writes its answer; it reports whether the connection stays open.
func (c *clientConn) serveRequest(h plainHead, n int) (keep bool) {
	c.start += n
	if c.f.cfg.Requests != nil {
		c.f.cfg.Requests.Inc()
	}
	// The answer's buffer is held only while a request runs: an idle
	// connection keeps its read buffer only.
	bp := outBuffers.Get().(*[]byte)
	c.out = (*bp)[:0]
	defer func() {
		if cap(c.out) <= 2*h1OutBuffer {
			*bp = c.out[:0]
			outBuffers.Put(bp)
		}
		c.out = nil
	}()
	// The request's own objects in one allocation: they live and die
	// together.
	one := &requestObjects{}
	ctx, body, w := &one.ctx, &one.body, &one.resp
	ctx.c = c
	defer ctx.cancelRequest()
	*body = requestBody{c: c, left: h.contentLength, ctx: ctx}
	ctx.body = body
	one.url.Path = h.path
	// WithContext copies this one (it stays on the stack): one Request
	// per request.
	tmpl := http.Request{
		Method: h.method, URL: &one.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.header, ContentLength: h.contentLength, Host: h.host, RemoteAddr: c.remote,
		RequestURI: h.path, Close: h.close, Body: http.NoBody,
	}
	if h.contentLength > 0 {
		tmpl.Body = body
	} else {
		body.read = true
	}
	r := tmpl.WithContext(ctx)
	*w = responseWriter{c: c, r: r, body: body, header: make(http.Header, 8), ctx: ctx, cl: -1}
	if body.read {
		c.arm(ctx)
	}
	defer func() {
		if p := recover(); p != nil {
			keep = false
			if p == http.ErrAbortHandler {
				return
			}
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.f.cfg.Log.Warn("http: panic serving", "remote", c.remote, "panic", fmt.Sprint(p), "stack", string(buf))
		}
	}()
	c.f.cfg.Handler.ServeHTTP(w, r)
	keep = c.unwatch()
	c.stopDeadline()
	finished := w.finish()
	body.done = true
	if body.left > 0 && w.err == nil && (!finished || body.left > h1DiscardBody || w.closeAfter) {
		// The connection closes over a body the client may still be
		// sending: serve half-closes and drains it first.
		c.unreadBody = true
		return false
	}
	if !finished {
		return false
	}
	if body.left > 0 {
		if _, err := io.Copy(io.Discard, &requestBody{c: c, left: body.left}); err != nil {
			return false
		}
	}
	return keep && !w.closeAfter
}

// requestObjects are a request's context, body, answer writer and URL.
type requestObjects struct {
	ctx  requestContext
	body requestBody
	resp responseWriter
	url  url.URL
}

var outBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// arm starts the timer after which a running request's context follows
// the client's connection (see watch), and which starts the request
// timeout's own timer; x is the request's context.
func (c *clientConn) arm(x *requestContext) {
	if c.start < len(c.in) {
		// Pipelined bytes wait; net/http does not watch these either. The
		// request timeout, if set, needs its timer now.
		c.startDeadline(x)
		return
	}
	if dl := x.deadlineAt(); !dl.IsZero() && time.Until(dl) <= h1WatchDelay {
		c.startDeadline(x)
	}
	c.wmu.Lock()
	c.wstate, c.wctx = watchArmed, x
	c.wmu.Unlock()
	if c.wtimer == nil {
		c.wtimer = time.AfterFunc(h1WatchDelay, c.watch)
	} else {
		c.wtimer.Reset(h1WatchDelay)
	}
}

// watch reads one byte from the client while its request runs: an end
// of the connection cancels the request's context, as net/http's
// background read does.
func (c *clientConn) watch() {
	c.wmu.Lock()
	if c.wstate != watchArmed {
		c.wmu.Unlock()
		return
	}
	c.wstate = watchReading
	c.wdone = make(chan struct{})
	done, x := c.wdone, c.wctx
	if c.stale {
		// The last head's deadline must not end this read (and with it
		// the request).
		_ = c.nc.SetReadDeadline(time.Time{})
		c.stale = false
	}
	c.wmu.Unlock()
	// A request running this long may run to its timeout: its timer
	// starts now (short requests never arm it).
	c.startDeadline(x)
	n, err := c.nc.Read(c.wbyte[:])
	c.wmu.Lock()
	c.wn, c.werr = n, err
	aborted := c.aborting
	c.wmu.Unlock()
	if n == 0 && err != nil && !aborted {
		x.cancelRequest()
	}
	close(done)
}

// unwatch stops the request's watch; it reports false when the watch saw
// the connection end.
func (c *clientConn) unwatch() bool {
	if c.wtimer == nil {
		return true
	}
	c.wtimer.Stop()
	c.wmu.Lock()
	st := c.wstate
	c.wstate = watchOff
	c.aborting = st == watchReading
	done := c.wdone
	c.wmu.Unlock()
	if st != watchReading {
		return true
	}
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	<-done
	_ = c.nc.SetReadDeadline(time.Time{})
	c.deadline, c.stale = false, false
	c.aborting = false
	if c.wn == 1 {
		if c.start == len(c.in) {
			c.in, c.start = c.in[:0], 0
		}
		c.in = append(c.in, c.wbyte[0]) // the next request's first byte
		return true
	}
	var ne net.Error
	return errors.As(c.werr, &ne) && ne.Timeout()
}

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
