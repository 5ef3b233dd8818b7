package backends

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Discovery names the backends a source currently holds.
type Discovery interface {
	// Discover returns backend URLs (or bare host:port). An error means
	// the source could not be read; the pool then keeps what it had.
	Discover(ctx context.Context) ([]string, error)
	// String names the source in errors and logs.
	String() string
}

// Resolver is the part of *net.Resolver discovery uses; tests substitute a
// fake to change DNS answers without a network.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// ParseDiscovery reads one backend spec:
//
//	http://host:port[/path], https://…, host:port  one static backend
//	dns://host:port[/path]                        one backend per A/AAAA address, named ip:port
//	srv://_service._proto.name                    one backend per SRV record, named target:port
//	file:///path/to/list                          a watched file, one URL per line, # comments
//
// Discovered backends are spoken to over http.
func ParseDiscovery(spec string, r Resolver) (Discovery, error) {
	s := strings.TrimSpace(spec)
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		scheme = "" // host:port: a static backend
	}
	if r == nil {
		r = net.DefaultResolver
	}
	switch strings.ToLower(scheme) {
	case "dns":
		u, err := url.Parse("http://" + rest)
		if err != nil {
			return nil, fmt.Errorf("backend %q: %w", spec, err)
		}
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("backend %q: dns:// needs host:port", spec)
		}
		return &dnsSource{host: host, port: port, path: strings.TrimSuffix(u.Path, "/"), r: r}, nil
	case "srv":
		name := strings.TrimSuffix(rest, "/")
		if name == "" || strings.ContainsAny(name, "/:") {
			return nil, fmt.Errorf("backend %q: srv:// needs a name like _http._tcp.vllm.example", spec)
		}
		return &srvSource{name: name, r: r}, nil
	case "file":
		if rest == "" {
			return nil, fmt.Errorf("backend %q: file:// needs a path", spec)
		}
		return &fileSource{path: rest}, nil
	}
	_, _, err := ParseBackendURL(s)
	return staticList{s}, err
}

// staticList is a fixed list of backend URLs.
type staticList []string

func (s staticList) Discover(context.Context) ([]string, error) { return s, nil }
func (s staticList) String() string                             { return strings.Join(s, ",") }

// dnsSource re-resolves host's A and AAAA records: one backend per address,
// named ip:port, at http://ip:port/path.
type dnsSource struct {
	host, port, path string
	r                Resolver
}

func (d *dnsSource) String() string { return "dns://" + net.JoinHostPort(d.host, d.port) + d.path }

func (d *dnsSource) Discover(ctx context.Context) ([]string, error) {
	addrs, err := d.r.LookupHost(ctx, d.host)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d, err)
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, "http://"+net.JoinHostPort(a, d.port)+d.path)
	}
	return out, nil
}

// srvSource re-resolves an SRV name such as _http._tcp.vllm.example: one
// backend per record, named target:port, at http://target:port. Priority
// and weight are not used; the router balances.
type srvSource struct {
	name string
	r    Resolver
}

func (d *srvSource) String() string { return "srv://" + d.name }

func (d *srvSource) Discover(ctx context.Context) ([]string, error) {
	_, recs, err := d.r.LookupSRV(ctx, "", "", d.name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d, err)
	}
	out := make([]string, 0, len(recs))
	for _, rec := range recs {
		target := strings.TrimSuffix(rec.Target, ".")
		if target == "" {
			continue
		}
		out = append(out, "http://"+net.JoinHostPort(target, fmt.Sprint(rec.Port)))
	}
	return out, nil
}

// fileSource reads a list of backends from path: one URL or host:port per
// line; blank lines and text from # on are ignored. The pool re-reads it
// every DiscoveryInterval and applies it when its content changes; a file
// that cannot be read or has a bad line leaves the last good list in force.
type fileSource struct{ path string }

func (f *fileSource) String() string { return "file://" + f.path }

func (f *fileSource) Discover(context.Context) ([]string, error) {
	raw, err := os.ReadFile(f.path)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, line := range strings.Split(string(raw), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if _, _, err := ParseBackendURL(line); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", f, i+1, err)
		}
		out = append(out, line)
	}
	return out, nil
}

// target is one resolved backend.
type target struct {
	name   string
	url    *url.URL
	engine Engine
}

// source is a Discovery with its last good answer.
type source struct {
	d      Discovery
	static bool
	engine Engine // from the spec's ENGINE+ prefix; every target gets it
	spec   string // as given, prefix included
	opened bool   // by Options.Open

	mu   sync.Mutex
	last []target
	err  error
}

// parseSources reads specs into sources; a spec the pool opens with
// Options.Open reuses old's source of the same spec.
func (p *Pool) parseSources(specs []string, old []*source) ([]*source, error) {
	var out []*source
	seen := map[string]bool{}
	for _, spec := range specs {
		engine, rest, err := SplitEngine(spec)
		if err != nil {
			closeSources(out, old)
			return nil, err
		}
		s, err := p.parseSource(spec, rest, engine, old)
		if err == nil && s.static {
			_, name, _ := ParseBackendURL(rest)
			if seen[name] {
				err = fmt.Errorf("backend %q is listed twice", name)
			}
			seen[name] = true
		}
		if err != nil {
			closeSources(out, old)
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *Pool) parseSource(spec, rest string, engine Engine, old []*source) (*source, error) {
	scheme, _, _ := strings.Cut(rest, "://")
	switch strings.ToLower(scheme) {
	case "http", "https", "dns", "srv", "file":
	default:
		if !strings.Contains(rest, "://") || p.opts.Open == nil {
			break
		}
		for _, s := range old {
			if s.opened && s.spec == spec {
				return s, nil
			}
		}
		d, err := p.opts.Open(rest, p.rediscoverSoon)
		if err != nil {
			return nil, err
		}
		return &source{d: d, engine: engine, spec: spec, opened: true}, nil
	}
	d, err := ParseDiscovery(rest, p.opts.Resolver)
	if err != nil {
		return nil, err
	}
	_, static := d.(staticList)
	return &source{d: d, static: static, engine: engine, spec: spec}, nil
}

// rediscoverSoon asks Run for a round of discovery now.
func (p *Pool) rediscoverSoon() {
	select {
	case p.rekick <- struct{}{}:
	default:
	}
}

// resolveAll asks every source once and joins their answers.
func resolveAll(srcs []*source, timeout time.Duration) ([]target, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, s := range srcs {
		if err := s.refresh(ctx); err != nil {
			return nil, err
		}
	}
	return union(srcs)
}

// closeSources closes the opened sources of srcs that keep does not hold.
func closeSources(srcs, keep []*source) {
	for _, s := range srcs {
		if c, ok := s.d.(io.Closer); ok && s.opened && !slices.Contains(keep, s) {
			_ = c.Close()
		}
	}
}

// Close stops the pool's watching discovery sources (Options.Open's).
func (p *Pool) Close() {
	p.applyMu.Lock()
	srcs := p.sources
	p.sources = nil
	p.applyMu.Unlock()
	closeSources(srcs, nil)
}

// refresh asks the source again. On error the last good answer stays.
func (s *source) refresh(ctx context.Context) error {
	addrs, err := s.d.Discover(ctx)
	var ts []target
	if err == nil {
		ts, err = targets(addrs, !s.static, s.engine)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err = err; err == nil {
		s.last = ts
	}
	return err
}

func targets(addrs []string, sorted bool, engine Engine) ([]target, error) {
	ts := make([]target, 0, len(addrs))
	for _, a := range addrs {
		// A discovered address may carry its own ENGINE+ prefix (a pod's
		// engine label, say), which wins over the spec's.
		e, a, err := SplitEngine(a)
		if err != nil {
			return nil, err
		}
		if e == EngineAuto {
			e = engine
		}
		u, name, err := ParseBackendURL(a)
		if err != nil {
			return nil, err
		}
		ts = append(ts, target{name: name, url: u, engine: e})
	}
	if sorted {
		// DNS answers come in any order; membership should not churn.
		slices.SortFunc(ts, func(a, b target) int { return cmp.Compare(a.name, b.name) })
	}
	return slices.CompactFunc(ts, func(a, b target) bool { return a.name == b.name }), nil
}

// union joins the sources' last answers; a name found twice keeps its
// first URL.
func union(srcs []*source) ([]target, error) {
	var out []target
	seen := map[string]bool{}
	var errs []error
	for _, s := range srcs {
		s.mu.Lock()
		last, err := s.last, s.err
		s.mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		for _, t := range last {
			if !seen[t.name] {
				seen[t.name] = true
				out = append(out, t)
			}
		}
	}
	return out, errors.Join(errs...)
}
