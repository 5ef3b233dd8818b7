package h1front

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
