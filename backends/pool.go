package backends

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prefixgate/prefixgate/backends/internal/h1client"
)

// Backend is one replica the router forwards to. Its Name is stable (the
// host:port of its URL) and is its ring member name.
type Backend struct {
	Name string
	URL  *url.URL

	// pool judges the backend's passive health (Observe) with its
	// thresholds and backoff; nil for a Backend made outside a pool.
	pool *Pool

	// state is the published State, read lock-free on the hot path; the
	// fields under mu decide it (see health.go).
	state   atomic.Int32
	removed atomic.Bool
	models  atomic.Pointer[[]string]
	// maxModelLen is the context length /v1/models states (0: unknown).
	maxModelLen atomic.Int64
	// modelEntries is the "data" array of the last /v1/models answer, as
	// the backend wrote it (at most 1 MiB, the probe's limit).
	modelEntries atomic.Pointer[[]byte]
	load         atomic.Pointer[LoadSignals]

	// configured is the engine the spec named (EngineAuto: detect);
	// detected is what scrapes found, as an Engine.
	configured Engine
	detected   atomic.Uint32
	// role is what the spec's ROLE+ prefix named (RoleBoth without one);
	// bootstrapPort is the SGLang bootstrap port its server info states.
	role          Role
	bootstrapPort atomic.Int32
	cacheTokens   atomic.Int64
	// cacheReport is SGLang's --enable-cache-report, from its server info;
	// reportsCached: an answer has stated cached_tokens (usage.go).
	cacheReport   atomic.Bool
	reportsCached atomic.Bool

	mu         sync.Mutex
	up         bool // probes and passive outcomes say it works
	draining   bool // Drain was called
	fails      int  // consecutive failures while up
	rises      int  // consecutive probe successes while down
	ejections  int  // ejections since it last stayed up for MaxEjectBackoff
	holdUntil  time.Time
	returnedAt time.Time
	nextInfo   time.Time // when the engine's info endpoint is next read
	// lastErr is the last failure seen, probe or request, and lastErrAt
	// when; changedAt is when the State last changed. They say why a
	// backend is out (see Health).
	lastErr   string
	lastErrAt time.Time
	changedAt time.Time
	// changes are the States published under mu and not yet reported to
	// OnState; they are reported after mu is released (see report).
	changes []State
}

// ID is the backend's Name: its member name for routing.
func (b *Backend) ID() string { return b.Name }

// Healthy reports whether the backend is in the candidate set: neither
// ejected nor draining.
func (b *Backend) Healthy() bool { return State(b.state.Load()) == StateHealthy }

// HealthName is the router's explanations' word for the backend's health:
// its State, and for an ejected backend since when and why (Health.Describe).
func (b *Backend) HealthName() string {
	now := time.Now
	if b.pool != nil {
		now = b.pool.now
	}
	return b.Health().Describe(now())
}

// State returns the backend's health state.
func (b *Backend) State() State { return State(b.state.Load()) }

// Models returns the models and LoRA adapters the backend listed at its last
// successful /v1/models probe; nil when it has not answered yet.
func (b *Backend) Models() []string {
	if m := b.models.Load(); m != nil {
		return *m
	}
	return nil
}

// ModelEntries is the "data" array of the backend's last /v1/models
// answer as it wrote it (each entry with its own fields: vLLM's created,
// owned_by, root, parent, max_model_len, permission); nil before a probe
// has read one.
func (b *Backend) ModelEntries() []byte {
	if m := b.modelEntries.Load(); m != nil {
		return *m
	}
	return nil
}

// DefaultProbeInterval is Options.ProbeInterval when it is 0.
const DefaultProbeInterval = 2 * time.Second

// DefaultScrapeInterval is Options.ScrapeInterval when it is 0.
const DefaultScrapeInterval = 2 * time.Second

// Options tune the pool. Zero values take the defaults in parentheses.
type Options struct {
	ConnectTimeout   time.Duration // dial timeout (2s)
	FirstByteTimeout time.Duration // time from sending to response headers (60s)
	// IdleTimeout fails a response body read after this long without a
	// byte, for streams that stall (0: no limit).
	IdleTimeout time.Duration
	// H2C speaks HTTP/2 to every backend: without TLS (prior knowledge)
	// to http:// ones, over TLS to https:// ones. Backends must support
	// it; there is no fallback to HTTP/1.1.
	H2C bool

	ProbeInterval time.Duration // active /health probe interval (2s)
	ProbeTimeout  time.Duration // one probe's timeout (1s)
	FailThreshold int           // consecutive failures (probe or request) that eject (3)
	RiseThreshold int           // consecutive probe successes that return an ejected backend (2)
	// EjectBackoff is how long the first ejection holds a backend out
	// before a probe may return it; each further ejection doubles it up to
	// MaxEjectBackoff (1s, 30s). A backend that stays up for
	// MaxEjectBackoff starts again from EjectBackoff.
	EjectBackoff    time.Duration
	MaxEjectBackoff time.Duration

	// ScrapeInterval is how often /metrics is read for load signals (2s;
	// negative: never).
	ScrapeInterval time.Duration
	// DiscoveryInterval is how often DNS names are re-resolved and watched
	// files re-read (10s).
	DiscoveryInterval time.Duration
	// ResolveTimeout bounds one round of discovery (5s).
	ResolveTimeout time.Duration
	// Resolver answers dns:// and srv:// lookups (net.DefaultResolver).
	Resolver Resolver
	// Open opens backend specs of schemes the pool does not know itself
	// (such as k8s:// and inferencepool://, internal/kubedisco); nil: such
	// specs are an error. A source that watches calls changed after each
	// change, and the pool asks it again at once. A source that is an
	// io.Closer is closed when SetBackends drops it or the pool closes.
	Open func(spec string, changed func()) (Discovery, error)

	// OnState is called when a backend's State changes; the backend's
	// lock is not held, so it may call back into the pool. Calls are
	// serialized and made in the order of the changes.
	OnState func(b *Backend, s State)
	// OnMembership is called with the new backend list after each change of
	// membership (SetBackends, discovery) or of a backend's model list.
	// Calls are serialized and each carries the latest list. It is not
	// called for the list NewPool starts with.
	OnMembership func([]*Backend)
	// OnScrape is called after each round of /metrics scrapes, when every
	// backend's Load is as fresh as it gets.
	OnScrape func()
	// ScrapeMark is called just before each /metrics scrape of b is sent;
	// what it returns is kept with that scrape's signals (LoadSignals.Mark),
	// so the owner can tell what changed between the engine's count and
	// its own (the router's completions since).
	ScrapeMark func(b *Backend) any
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ConnectTimeout, 2*time.Second)
	def(&o.FirstByteTimeout, 60*time.Second)
	def(&o.ProbeInterval, DefaultProbeInterval)
	def(&o.ProbeTimeout, time.Second)
	def(&o.EjectBackoff, time.Second)
	def(&o.MaxEjectBackoff, 30*time.Second)
	def(&o.DiscoveryInterval, 10*time.Second)
	def(&o.ResolveTimeout, 5*time.Second)
	if o.ScrapeInterval == 0 {
		o.ScrapeInterval = DefaultScrapeInterval
	}
	if o.MaxEjectBackoff < o.EjectBackoff {
		o.MaxEjectBackoff = o.EjectBackoff
	}
	if o.FailThreshold <= 0 {
		o.FailThreshold = 3
	}
	if o.RiseThreshold <= 0 {
		o.RiseThreshold = 2
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
}

// Pool holds the backends and the shared HTTP client that reaches them.
type Pool struct {
	opts Options
	// transport forwards requests; Forward calls it directly, with no
	// http.Client around it (see Forward).
	transport http.RoundTripper
	probe     *http.Client

	// members is an immutable snapshot, swapped whole; Get and Backends
	// never lock.
	members atomic.Pointer[members]

	// applyMu serializes changes to sources and membership.
	applyMu sync.Mutex
	sources []*source
	drained map[string]bool // SetDrained's names

	// notifyMu serializes OnMembership calls; stateMu OnState calls.
	notifyMu sync.Mutex
	stateMu  sync.Mutex

	discoveryErr atomic.Pointer[error]
	kick         chan struct{} // asks Run to probe new backends now
	rekick       chan struct{} // asks Run to rediscover now (Options.Open's changed)
	now          func() time.Time
}

type members struct {
	list   []*Backend
	byName map[string]*Backend
}

// ParseBackendURL checks a backend address and returns its URL and stable
// name. A bare host:port means http://host:port.
func ParseBackendURL(raw string) (*url.URL, string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, "", errors.New("backend address is empty")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, "", fmt.Errorf("backend %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, "", fmt.Errorf("backend %q: scheme %q is not http, https, dns, srv or file", raw, u.Scheme)
	}
	if u.Host == "" {
		return nil, "", fmt.Errorf("backend %q: no host", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, u.Host, nil
}

// NewPool builds a pool over the given backend specs: URLs (a bare
// host:port means http://host:port) and discovery sources (dns://,
// srv://, file://; see ParseDiscovery), resolved once before it returns.
// Backends start healthy; Run starts probing, scraping and re-resolving.
func NewPool(specs []string, opts Options) (*Pool, error) {
	opts.defaults()
	p := &Pool{opts: opts, kick: make(chan struct{}, 1), rekick: make(chan struct{}, 1), now: time.Now}
	p.members.Store(&members{byName: map[string]*Backend{}})
	dialer := &net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: opts.FirstByteTimeout,
		// Bodies are already decoded and canonical; never let the transport
		// add Accept-Encoding and transparently decompress.
		DisableCompression: true,
		// Chat bodies run to tens of KiB: write them in one syscall, not
		// in 4 KiB pieces.
		WriteBufferSize: 64 << 10,
		ReadBufferSize:  32 << 10,
	}
	if opts.H2C {
		transport.Protocols = new(http.Protocols)
		transport.Protocols.SetUnencryptedHTTP2(true)
		transport.Protocols.SetHTTP2(true)
		// HTTP/1 must be off: with it on, http:// URLs would use it.
	}
	p.transport = transport
	if !opts.H2C && h1client.CanPeek {
		// HTTP/1.1 keep-alive, what vLLM serves, on the caller's
		// goroutine (h1client); net/http's Transport for the rest, and
		// for everything where h1client cannot see a backend close an
		// idle connection before reusing it.
		p.transport = &h1client.Transport{
			Fallback: transport, Dial: dialer.DialContext, HeaderTimeout: opts.FirstByteTimeout,
			MaxIdlePerHost: transport.MaxIdleConnsPerHost, IdleTimeout: transport.IdleConnTimeout,
			ReadBufferSize: transport.ReadBufferSize, MaxResponseHeaderBytes: transport.MaxResponseHeaderBytes,
		}
	}
	// Probes get their own connections so that a pool full of streams
	// cannot starve them, and a probe timeout does not kill a stream's
	// connection.
	probeTransport := transport.Clone()
	probeTransport.MaxIdleConnsPerHost = 4
	p.probe = &http.Client{Transport: probeTransport, Timeout: opts.ProbeTimeout}
	if err := p.setBackends(specs, false); err != nil {
		return nil, err
	}
	return p, nil
}

// SetBackends replaces the backend specs (URLs and discovery sources) and
// resolves them at once. Backends present before keep their state, so
// in-flight requests and health are not disturbed; removed ones finish
// what they have. An error leaves the pool as it was.
func (p *Pool) SetBackends(specs []string) error { return p.setBackends(specs, true) }

func (p *Pool) setBackends(specs []string, notify bool) error {
	if len(specs) == 0 {
		return errors.New("no backends: give at least one --backend URL")
	}
	p.applyMu.Lock()
	old := p.sources
	p.applyMu.Unlock()
	srcs, err := p.parseSources(specs, old)
	if err != nil {
		return err
	}
	targets, err := resolveAll(srcs, p.opts.ResolveTimeout)
	if err == nil && len(targets) == 0 {
		err = fmt.Errorf("no backends: %s resolved to nothing", strings.Join(specs, ", "))
	}
	if err != nil {
		closeSources(srcs, old)
		return err
	}
	p.applyMu.Lock()
	p.sources = srcs
	changed := p.applyLocked(targets)
	p.applyMu.Unlock()
	closeSources(old, srcs)
	if changed && notify {
		p.notifyMembership()
	}
	return nil
}

// applyLocked makes targets the membership. Backends whose name stays keep
// their *Backend (state, counters, connections). It reports whether
// anything changed.
func (p *Pool) applyLocked(targets []target) bool {
	cur := p.members.Load()
	next := &members{list: make([]*Backend, 0, len(targets)), byName: make(map[string]*Backend, len(targets))}
	var added []*Backend
	for _, t := range targets {
		b, ok := cur.byName[t.name]
		if !ok || b.URL.String() != t.url.String() || b.configured != t.engine || b.role != t.role {
			b = newBackend(p, t.name, t.url, t.engine, p.drained[t.name])
			b.role = t.role
			added = append(added, b)
		}
		next.list = append(next.list, b)
		next.byName[t.name] = b
	}
	if slices.Equal(cur.list, next.list) {
		return false
	}
	for _, b := range cur.list {
		if next.byName[b.Name] != b {
			b.removed.Store(true)
		}
	}
	p.members.Store(next)
	if len(added) > 0 && len(cur.list) > 0 {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	return true
}

func newBackend(p *Pool, name string, u *url.URL, e Engine, draining bool) *Backend {
	b := &Backend{Name: name, URL: u, pool: p, up: true, configured: e, draining: draining}
	if draining {
		b.state.Store(int32(StateDraining))
	}
	return b
}

// notifyMembership calls OnMembership with the current list.
func (p *Pool) notifyMembership() {
	if p.opts.OnMembership == nil {
		return
	}
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	p.opts.OnMembership(p.Backends())
}

// Backends returns the current backends: static URLs in the order given,
// then each discovery source's backends sorted by name.
func (p *Pool) Backends() []*Backend {
	return slices.Clone(p.members.Load().list)
}

// Get returns the backend with the given name.
func (p *Pool) Get(name string) (*Backend, bool) {
	b, ok := p.members.Load().byName[name]
	return b, ok
}

// DiscoveryError returns the last discovery round's error, or nil. While
// discovery fails the pool keeps the backends it last resolved.
func (p *Pool) DiscoveryError() error {
	if e := p.discoveryErr.Load(); e != nil {
		return *e
	}
	return nil
}

// Forward sends one request to a backend and returns its response with the
// body unread; the caller closes it. hdr carries headers to pass through
// (Authorization, tracing); hop-by-hop and length headers are set here.
//
// The error contract, which the server's retry relies on: an
// *UnreachableError means nothing came back from the backend (refused,
// reset, connect or first-byte timeout) and the request may go to another
// backend. Cancellation of ctx is returned as ctx's error, not as
// UnreachableError. Any response, whatever its status, is returned as a
// response; once it is returned the request must not be retried. Forward
// judges nothing: what became of the request (the error, the status, a
// stream that stalled) reaches passive health once, through b.Observe,
// which the router's DoneWith calls with the request's outcome.
func (p *Pool) Forward(ctx context.Context, b *Backend, method, path string, body []byte, hdr http.Header) (*http.Response, error) {
	// The request is built from the backend's parsed URL and handed to the
	// transport itself: http.Client would print and parse the URL again
	// per request, and it would follow a redirect, which a proxy must
	// pass back to its client instead (the client decides whether to
	// follow it, with its own credentials and method rules).
	u := *b.URL
	u.Path = b.URL.Path + path
	if b.URL.RawPath != "" {
		u.RawPath = b.URL.RawPath + path
	}
	// Built as a literal: NewRequestWithContext would parse an empty URL
	// into a URL and make a header map, both replaced here. WithContext's
	// copy is the one way to set the context otherwise.
	if ctx == nil {
		return nil, fmt.Errorf("backend %s: nil context", b.Name)
	}
	if method == "" {
		method = http.MethodGet // as NewRequest reads it
	}
	if !h1client.ValidToken(method) {
		return nil, fmt.Errorf("backend %s: invalid method %q", b.Name, method)
	}
	if t, ok := p.transport.(*h1client.Transport); ok && h1client.FastPath(&u, int64(len(body))) {
		// The fast path copies body into the message it sends, and sends
		// hdr as the rules below say without a copy of it to edit
		// (appendForwardHead).
		req := (&http.Request{
			Method: method, URL: &u, Host: u.Host,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: hdr, ContentLength: int64(len(body)), Body: http.NoBody,
		}).WithContext(ctx)
		resp, err := t.Forward(req, body)
		return p.forwarded(ctx, b, method, &u, resp, err)
	}
	req := (&http.Request{
		Method: method, URL: &u, Host: u.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, len(hdr)+1),
	}).WithContext(ctx)
	for k, vs := range hdr {
		switch k {
		case "Content-Encoding", "Content-Length":
			continue // the body is decoded, and its length is set below
		}
		req.Header[k] = vs
	}
	if body != nil {
		req.Header["Content-Type"] = jsonContentType
	}
	req.ContentLength = int64(len(body))
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	if req.ContentLength == 0 {
		req.Body = http.NoBody
	}
	resp, err := p.transport.RoundTrip(req)
	return p.forwarded(ctx, b, method, &u, resp, err)
}

// ForwardStream is Forward for a body read as it is sent, such as an
// upload: length is its size in bytes, -1 when unknown (then it is sent
// chunked), and hdr's Content-Type is kept. The body can be read once, so
// the transport never sends it again. path may end in a query
// ("?stream=true"), which is passed on as it is.
func (p *Pool) ForwardStream(ctx context.Context, b *Backend, method, path string, body io.Reader, length int64, hdr http.Header) (*http.Response, error) {
	path, query, _ := strings.Cut(path, "?")
	u := *b.URL
	u.Path, u.RawQuery = b.URL.Path+path, query
	if b.URL.RawPath != "" {
		u.RawPath = b.URL.RawPath + path
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), io.NopCloser(body))
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", b.Name, err)
	}
	for k, vs := range hdr {
		if k != "Content-Encoding" && k != "Content-Length" {
			req.Header[k] = vs
		}
	}
	req.ContentLength = length
	if length == 0 {
		req.Body = http.NoBody
	}
	resp, err := p.transport.RoundTrip(req)
	return p.forwarded(ctx, b, method, &u, resp, err)
}

// forwarded is the end of Forward, for either transport: the error as
// its contract says, or the response under the idle timeout.
func (p *Pool) forwarded(ctx context.Context, b *Backend, method string, u *url.URL, resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("backend %s: %w", b.Name, cerr)
		}
		// A dial or read that failed at the request's deadline may see it
		// a moment before the context's own timer does: the request timed
		// out, and the backend is not at fault.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			return nil, fmt.Errorf("backend %s: %w: %v", b.Name, context.DeadlineExceeded, err)
		}
		return nil, &UnreachableError{Backend: b.Name, Err: fmt.Errorf("%s %s: %w", method, u.Redacted(), err), Sent: mayHaveSent(err),
			ClosedOnReuse: errors.Is(err, h1client.ErrClosedOnReuse)}
	}
	if p.opts.IdleTimeout > 0 {
		resp.Body = newIdleBody(resp.Body, p.opts.IdleTimeout)
	}
	return resp, nil
}

// jsonContentType is the Content-Type of every forwarded body, shared
// read-only by all requests' headers.
var jsonContentType = []string{"application/json"}

// HoldsBody reports whether the transport may still read the body of a
// Forward to b of n bytes after Forward has returned (a response can come
// back before the body is written, and net/http's Transport may write it
// again on another connection). It is false when the HTTP/1.1 fast path
// takes the request: that copies the body into its own buffer before it
// sends anything, so the caller may reuse the body as soon as Forward
// returns.
func (p *Pool) HoldsBody(b *Backend, n int) bool {
	_, ok := p.transport.(*h1client.Transport)
	return !ok || !h1client.FastPath(b.URL, int64(n))
}

// mayHaveSent reports whether a transport's error leaves open that the
// request reached the backend. The HTTP/1.1 client says when nothing was
// written (h1client.ErrNotSent); of net/http's errors only a failed dial
// or name lookup proves it.
func mayHaveSent(err error) bool {
	if errors.Is(err, h1client.ErrNotSent) {
		return false
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return false
	}
	var op *net.OpError
	return !errors.As(err, &op) || op.Op != "dial"
}

// UnreachableError says a backend sent nothing back: the request may be
// retried on another backend.
type UnreachableError struct {
	Backend string
	Err     error
	// Sent is true when the request may have reached the backend (some
	// of it was written, or the transport cannot tell), which may then
	// be running it; false when it provably did not (the connection
	// could not be made, or closed before a byte was written).
	Sent bool
	// ClosedOnReuse is true when the request went out on a reused
	// keep-alive connection that the backend ended before a byte of
	// answer: some servers (llama.cpp's) close after every streamed answer
	// while announcing keep-alive, so the request meets a connection that
	// is closing. Sending it once more on the same backend is worth a try
	// before the failure counts against it.
	ClosedOnReuse bool
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("backend %s unreachable: %v", e.Backend, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }
