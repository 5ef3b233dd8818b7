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

	"github.com/tidwall/gjson"
)

// Backend is one replica the router forwards to. Its Name is stable (the
// host:port of its URL) and is its ring member name.
type Backend struct {
	Name string
	URL  *url.URL

	healthy  atomic.Bool
	failures atomic.Int32
	models   atomic.Pointer[[]string]
}

// Healthy reports whether the backend is in the candidate set.
func (b *Backend) Healthy() bool { return b.healthy.Load() }

// Models returns the models and LoRA adapters the backend listed at its last
// successful /v1/models probe; nil when it has not answered yet.
func (b *Backend) Models() []string {
	if m := b.models.Load(); m != nil {
		return *m
	}
	return nil
}

// Options tune the pool. Zero values take the defaults in parentheses.
type Options struct {
	ConnectTimeout   time.Duration // dial timeout (2s)
	FirstByteTimeout time.Duration // time to response headers (60s)
	ProbeInterval    time.Duration // active /health probe interval (2s)
	ProbeTimeout     time.Duration // one probe's timeout (1s)
	FailThreshold    int           // consecutive failures that eject (3)
	// OnHealth is called when a backend's health changes.
	OnHealth func(name string, healthy bool)
}

func (o *Options) defaults() {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 2 * time.Second
	}
	if o.FirstByteTimeout <= 0 {
		o.FirstByteTimeout = 60 * time.Second
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 2 * time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = time.Second
	}
	if o.FailThreshold <= 0 {
		o.FailThreshold = 3
	}
}

// Pool holds the backends and the shared HTTP client that reaches them.
type Pool struct {
	opts   Options
	client *http.Client
	probe  *http.Client

	mu       sync.RWMutex
	backends []*Backend
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
		return nil, "", fmt.Errorf("backend %q: scheme %q is not http or https", raw, u.Scheme)
	}
	if u.Host == "" {
		return nil, "", fmt.Errorf("backend %q: no host", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, u.Host, nil
}

// NewPool builds a pool over the given backend addresses. Backends start
// healthy; Run starts probing them.
func NewPool(addrs []string, opts Options) (*Pool, error) {
	opts.defaults()
	p := &Pool{opts: opts}
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
	}
	p.client = &http.Client{Transport: transport}
	p.probe = &http.Client{Transport: transport, Timeout: opts.ProbeTimeout}
	if err := p.SetBackends(addrs); err != nil {
		return nil, err
	}
	return p, nil
}

// SetBackends replaces the backend list. Backends present before keep their
// state, so in-flight requests and health are not disturbed.
func (p *Pool) SetBackends(addrs []string) error {
	if len(addrs) == 0 {
		return errors.New("no backends: give at least one --backend URL")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := make(map[string]*Backend, len(p.backends))
	for _, b := range p.backends {
		old[b.Name] = b
	}
	next := make([]*Backend, 0, len(addrs))
	seen := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		u, name, err := ParseBackendURL(a)
		if err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("backend %q is listed twice", name)
		}
		seen[name] = true
		if b, ok := old[name]; ok {
			next = append(next, b)
			continue
		}
		b := &Backend{Name: name, URL: u}
		b.healthy.Store(true)
		next = append(next, b)
	}
	p.backends = next
	return nil
}

// Backends returns the current backends in configuration order.
func (p *Pool) Backends() []*Backend {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.backends)
}

// Get returns the backend with the given name.
func (p *Pool) Get(name string) (*Backend, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, b := range p.backends {
		if b.Name == name {
			return b, true
		}
	}
	return nil, false
}

// Forward sends one request to a backend and returns its response with the
// body unread; the caller closes it. hdr carries headers to pass through
// (Authorization, tracing); hop-by-hop and length headers are set here.
func (p *Pool) Forward(ctx context.Context, b *Backend, method, path string, body []byte, hdr http.Header) (*http.Response, error) {
	u := *b.URL
	u.Path = b.URL.Path + path
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", b.Name, err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Del("Content-Encoding")
	req.Header.Del("Content-Length")
	req.ContentLength = int64(len(body))
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, &UnreachableError{Backend: b.Name, Err: err}
	}
	return resp, nil
}

// UnreachableError says a backend sent nothing back: the request may be
// retried on another backend.
type UnreachableError struct {
	Backend string
	Err     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("backend %s unreachable: %v", e.Backend, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ReportFailure records a failed request to b; after FailThreshold in a row
// the backend leaves the candidate set until a probe succeeds.
func (p *Pool) ReportFailure(b *Backend) {
	if int(b.failures.Add(1)) >= p.opts.FailThreshold {
		p.setHealthy(b, false)
	}
}

// Eject takes b out of the candidate set at once, for a backend that sent
// nothing back; the next successful probe returns it.
func (p *Pool) Eject(b *Backend) {
	b.failures.Store(int32(p.opts.FailThreshold))
	p.setHealthy(b, false)
}

// ReportSuccess records a successful request to b.
func (p *Pool) ReportSuccess(b *Backend) {
	b.failures.Store(0)
}

func (p *Pool) setHealthy(b *Backend, ok bool) {
	if b.healthy.Swap(ok) != ok && p.opts.OnHealth != nil {
		p.opts.OnHealth(b.Name, ok)
	}
}

// Run probes every backend's /health and /v1/models until ctx ends.
func (p *Pool) Run(ctx context.Context) {
	t := time.NewTicker(p.opts.ProbeInterval)
	defer t.Stop()
	for {
		p.ProbeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ProbeAll probes every backend once, concurrently.
func (p *Pool) ProbeAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, b := range p.Backends() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.probeOne(ctx, b)
		}()
	}
	wg.Wait()
}

func (p *Pool) probeOne(ctx context.Context, b *Backend) {
	ok := p.get(ctx, b, "/health") == nil
	if ok {
		b.failures.Store(0)
		if models, err := p.fetchModels(ctx, b); err == nil {
			b.models.Store(&models)
		}
	} else {
		b.failures.Add(1)
	}
	p.setHealthy(b, ok || int(b.failures.Load()) < p.opts.FailThreshold)
}

func (p *Pool) get(ctx context.Context, b *Backend, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL.String()+path, nil)
	if err != nil {
		return err
	}
	resp, err := p.probe.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", path, resp.StatusCode)
	}
	return nil
}

// fetchModels reads the OpenAI model list; a backend without /v1/models is
// served all the same (its list stays empty, meaning "any model").
func (p *Pool) fetchModels(ctx context.Context, b *Backend) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL.String()+"/v1/models", nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.probe.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/v1/models answered %d", resp.StatusCode)
	}
	var models []string
	gjson.GetBytes(raw, "data.#.id").ForEach(func(_, v gjson.Result) bool {
		models = append(models, v.String())
		return true
	})
	return models, nil
}
