package h1front

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

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
