package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// State is a backend's place in the candidate set.
type State int32

const (
	// StateHealthy backends take new requests.
	StateHealthy State = iota
	// StateEjected backends failed probes or requests; they take nothing
	// until RiseThreshold probes in a row succeed after their backoff.
	StateEjected
	// StateDraining backends finish what they have and take nothing new,
	// whatever their probes say, until Undrain.
	StateDraining
)

var stateNames = [...]string{StateHealthy: "healthy", StateEjected: "ejected", StateDraining: "draining"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Observe judges one finished request to b from its outcome: err is the
// forwarding or relaying error (nil when the answer was relayed whole) and
// status the HTTP status (0 when no answer came back). It is the only way
// passive health learns of requests, and the router's Decision.DoneWith
// calls it once per pick (b satisfies route.Observer). An UnreachableError
// (nothing came back) ejects b at once; a 5xx or a stream that stalled past
// the idle timeout counts as a failure (FailThreshold in a row eject); any
// other answer is a success. Other errors say nothing of b: the client went
// away or its context ended.
func (b *Backend) Observe(err error, status int) {
	p := b.pool
	if p == nil {
		return
	}
	var ue *UnreachableError
	b.mu.Lock()
	switch {
	case errors.As(err, &ue):
		// Nothing came back: out at once. It returns like any ejected
		// backend: after its backoff, RiseThreshold probes in a row.
		now := p.now()
		// Forward wraps the transport's error in the method and URL.
		cause := ue.Err
		if inner := errors.Unwrap(cause); inner != nil {
			cause = inner
		}
		b.noteErrLocked("request: "+causeOf(cause).Error(), now)
		if b.up {
			p.ejectLocked(b, now)
		}
	case status >= 500 || errors.Is(err, ErrIdleTimeout):
		// After FailThreshold in a row it leaves the candidate set until
		// its backoff has passed and RiseThreshold probes in a row succeed.
		now := p.now()
		if status >= 500 {
			b.noteErrLocked(fmt.Sprintf("request: answered %d", status), now)
		} else {
			b.noteErrLocked("request: "+err.Error(), now)
		}
		p.failLocked(b, now)
	default:
		// A success ends a failure streak; other errors (the client went
		// away, its context ended) say nothing of b. Neither changes its
		// state, so there is nothing to report.
		if err == nil && status > 0 && b.up {
			b.fails = 0
		}
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	p.report(b)
}

// SetDrained makes names the configuration's drained set: backends newly
// listed are drained, backends no longer listed are undrained, and a listed
// name not in the pool yet starts drained when it appears. A backend listed
// before and still listed is left as it is, so an operator's Undrain lasts
// until the configuration stops listing it. It returns the listed names not
// in the pool.
func (p *Pool) SetDrained(names []string) (absent []string) {
	next := make(map[string]bool, len(names))
	for _, n := range names {
		next[n] = true
	}
	p.applyMu.Lock()
	prev := p.drained
	p.drained = next
	p.applyMu.Unlock()
	for _, n := range names {
		if !prev[n] && !p.Drain(n) {
			absent = append(absent, n)
		}
	}
	for n := range prev {
		if !next[n] {
			p.Undrain(n)
		}
	}
	return absent
}

// Drain stops new requests to the named backend; requests in flight finish
// (watch InFlight). Probes go on, so Undrain returns it in the state they
// say. It reports whether the backend is in the pool.
func (p *Pool) Drain(name string) bool { return p.setDraining(name, true) }

// Undrain ends Drain.
func (p *Pool) Undrain(name string) bool { return p.setDraining(name, false) }

func (p *Pool) setDraining(name string, on bool) bool {
	b, ok := p.Get(name)
	if !ok {
		return false
	}
	b.mu.Lock()
	b.draining = on
	p.publishLocked(b)
	b.mu.Unlock()
	p.report(b)
	return true
}

// failLocked counts one failure (probe or request).
func (p *Pool) failLocked(b *Backend, now time.Time) {
	if !b.up {
		b.rises = 0
		return
	}
	b.fails++
	if b.fails >= p.opts.FailThreshold {
		p.ejectLocked(b, now)
	}
}

// ejectLocked takes b down and holds it out for its backoff.
func (p *Pool) ejectLocked(b *Backend, now time.Time) {
	if !b.returnedAt.IsZero() && now.Sub(b.returnedAt) >= p.opts.MaxEjectBackoff {
		b.ejections = 0 // it stayed up long enough: forgive the history
	}
	b.ejections++
	backoff := p.opts.EjectBackoff
	for i := 1; i < b.ejections && backoff < p.opts.MaxEjectBackoff; i++ {
		backoff *= 2
	}
	backoff = min(backoff, p.opts.MaxEjectBackoff)
	b.up, b.fails, b.rises = false, 0, 0
	b.holdUntil = now.Add(backoff)
	p.publishLocked(b)
}

// probedLocked applies one probe's outcome: err is nil when it passed.
func (p *Pool) probedLocked(b *Backend, err error, now time.Time) {
	switch {
	case err != nil:
		b.noteErrLocked("probe: "+err.Error(), now)
		p.failLocked(b, now)
	case b.up:
		b.fails = 0
	case now.Before(b.holdUntil):
		// Still backing off; Run does not probe it, ProbeAll might.
	default:
		b.rises++
		if b.rises >= p.opts.RiseThreshold {
			b.up, b.rises, b.returnedAt = true, 0, now
			p.publishLocked(b)
		}
	}
}

// publishLocked recomputes b's State and queues a change for report.
func (p *Pool) publishLocked(b *Backend) {
	next := StateEjected
	switch {
	case b.draining:
		next = StateDraining
	case b.up:
		next = StateHealthy
	}
	prev := State(b.state.Swap(int32(next)))
	if prev != next {
		b.changedAt = p.now()
	}
	if prev != next && p.opts.OnState != nil {
		b.changes = append(b.changes, next)
	}
}

// report calls OnState for b's queued changes, with b's lock released so
// that the callee (the router, readiness) never runs under it.
func (p *Pool) report(b *Backend) {
	if p.opts.OnState == nil {
		return
	}
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	b.mu.Lock()
	changes := b.changes
	b.changes = nil
	b.mu.Unlock()
	if b.removed.Load() {
		return
	}
	for _, st := range changes {
		p.opts.OnState(b, st)
	}
}

// Run probes every backend's /health and /v1/models, scrapes /metrics and
// re-resolves discovery sources until ctx ends.
func (p *Pool) Run(ctx context.Context) {
	var wg sync.WaitGroup
	// A kick means discovery added backends: probe them now.
	wg.Go(func() { every(ctx, p.opts.ProbeInterval, true, p.kick, p.probeDue) })
	if p.opts.ScrapeInterval > 0 {
		// At once: engine and cache capacity from the start.
		wg.Go(func() { every(ctx, p.opts.ScrapeInterval, true, nil, p.ScrapeAll) })
	}
	wg.Go(func() { every(ctx, p.opts.DiscoveryInterval, false, p.rekick, p.Rediscover) })
	wg.Wait()
}

// every calls f (at once first when atOnce) every d, and on each kick,
// until ctx ends.
func every(ctx context.Context, d time.Duration, atOnce bool, kick <-chan struct{}, f func(context.Context)) {
	if atOnce {
		f(ctx)
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		f(ctx)
	}
}

// ProbeAll probes every backend once, concurrently, backoff or not.
func (p *Pool) ProbeAll(ctx context.Context) { p.probe1(ctx, p.Backends()) }

// probeDue probes every backend not held out by its ejection backoff.
func (p *Pool) probeDue(ctx context.Context) {
	now := p.now()
	bs := slices.DeleteFunc(p.Backends(), func(b *Backend) bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.up && now.Before(b.holdUntil)
	})
	p.probe1(ctx, bs)
}

func (p *Pool) probe1(ctx context.Context, bs []*Backend) {
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Go(func() { p.probeOne(ctx, b) })
	}
	wg.Wait()
}

func (p *Pool) probeOne(ctx context.Context, b *Backend) {
	_, err := p.get(ctx, b, "/health", 1<<16)
	if ctx.Err() != nil {
		return // shutting down: not the backend's fault
	}
	changed := false
	if err == nil {
		models, maxLen, entries, merr := p.fetchModels(ctx, b)
		if merr == nil {
			b.maxModelLen.Store(int64(maxLen))
			b.modelEntries.Store(&entries)
		}
		if merr == nil && !slices.Equal(models, b.Models()) {
			b.models.Store(&models)
			changed = true
		}
	}
	b.mu.Lock()
	p.probedLocked(b, err, p.now())
	b.mu.Unlock()
	p.report(b)
	if changed && !b.removed.Load() {
		p.notifyMembership()
	}
}

// get GETs path from b over the probe client and returns the body, read up
// to limit bytes; any status but 200 is an error.
func (p *Pool) get(ctx context.Context, b *Backend, path string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL.String()+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.probe.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, causeOf(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s answered %d", path, resp.StatusCode)
	}
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return raw, nil
}

// MaxModelLen returns the longest prompt plus output, in tokens, the
// backend's /v1/models stated (vLLM's max_model_len) at its last probe; 0
// when it states none or has not answered yet.
func (b *Backend) MaxModelLen() int { return int(b.maxModelLen.Load()) }

// causeOf is err's message without the request's URL, which url.Error
// repeats and every reader of a backend's health already has.
func causeOf(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// fetchModels reads the OpenAI model list, vLLM's max_model_len (the
// largest any entry states, 0 when none does) and the list's entries as
// written; a backend without
// /v1/models is served all the same (its list stays empty, meaning "any
// model").
func (p *Pool) fetchModels(ctx context.Context, b *Backend) (models []string, maxLen int, entries []byte, err error) {
	raw, err := p.get(ctx, b, "/v1/models", 1<<20)
	if err != nil {
		return nil, 0, nil, err
	}
	models = []string{}
	data := gjson.GetBytes(raw, "data")
	if data.IsArray() {
		entries = []byte(data.Raw)
	}
	data.ForEach(func(_, v gjson.Result) bool {
		if id := v.Get("id"); id.Exists() {
			models = append(models, id.String())
		}
		maxLen = max(maxLen, int(v.Get("max_model_len").Int()))
		return true
	})
	return models, maxLen, entries, nil
}

// Rediscover re-resolves the DNS and file sources once and applies any
// change. While a source fails, its last good answer stays; a round that
// would leave no backends at all is not applied.
func (p *Pool) Rediscover(ctx context.Context) {
	p.applyMu.Lock()
	srcs := p.sources
	p.applyMu.Unlock()
	dynamic := false
	rctx, cancel := context.WithTimeout(ctx, p.opts.ResolveTimeout)
	defer cancel()
	for _, s := range srcs {
		if !s.static {
			dynamic = true
			_ = s.refresh(rctx) // kept in s.err, reported by union
		}
	}
	if !dynamic || ctx.Err() != nil {
		return
	}
	ts, err := union(srcs)
	if len(ts) == 0 {
		err = fmt.Errorf("discovery found no backends; keeping the last %d: %w", len(p.Backends()), err)
	}
	if err != nil {
		p.discoveryErr.Store(&err)
	} else {
		p.discoveryErr.Store(nil)
	}
	if len(ts) == 0 {
		return
	}
	p.applyMu.Lock()
	changed := false
	if slices.Equal(p.sources, srcs) { // else SetBackends replaced them meanwhile
		changed = p.applyLocked(ts)
	}
	p.applyMu.Unlock()
	if changed {
		p.notifyMembership()
	}
}
