package vllmsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Replica is one live simulated vLLM server: an http.Handler over an Engine
// whose clock runs Config.Speed times faster than the wall clock. A goroutine
// drives the engine; Close stops it. A Replica can serve through any
// http.Server (for example httptest.NewServer(r)) or its own (Start).
type Replica struct {
	name string
	cfg  Config
	// role is Config.Role, resolved; rooms are the SGLang bootstrap rooms
	// its legs meet in (pd_sglang.go).
	role      string
	rooms     rooms
	handler   http.Handler
	wallStart time.Time
	created   int64

	mu       sync.Mutex
	eng      *Engine
	waiters  map[RequestID]*waiter
	adapters []adapter
	// responses holds stored Responses; it has its own lock.
	responses *responseStore
	faults    Faults
	rng       *rand.Rand
	crashed   bool
	crashCh   chan struct{} // closed on crash
	srv       *http.Server
	addr      string // listen address once started

	wake     chan struct{}
	stop     chan struct{}
	loopDone chan struct{}
	closing  sync.Once
}

type adapter struct{ name, path string }

type waiter struct {
	first chan Event
	done  chan Event
}

// NewReplica returns a running replica named name (reported in the
// X-Vllmsim-Replica response header) that is not yet listening.
func NewReplica(name string, cfg Config) (*Replica, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	eng, err := NewEngine(cfg.Engine)
	if err != nil {
		return nil, err
	}
	r := &Replica{
		name:      name,
		cfg:       cfg,
		role:      cfg.Role,
		wallStart: time.Now(),
		eng:       eng,
		waiters:   make(map[RequestID]*waiter),
		responses: newResponseStore(cfg.ResponsesStoreSize),
		faults:    cfg.Faults,
		rng:       rand.New(rand.NewPCG(cfg.Seed, hashString(name))),
		crashCh:   make(chan struct{}),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		loopDone:  make(chan struct{}),
	}
	r.created = r.wallStart.Unix()
	for _, a := range cfg.Adapters {
		n, p, ok := strings.Cut(a, "=")
		if !ok {
			p = "/adapters/" + n
		}
		r.adapters = append(r.adapters, adapter{n, p})
	}
	r.handler = r.routes()
	go r.loop()
	return r, nil
}

// Name returns the replica's name.
func (r *Replica) Name() string { return r.name }

// Model returns the served base model name.
func (r *Replica) Model() string { return r.cfg.Model }

// Config returns the replica's resolved configuration.
func (r *Replica) Config() Config { return r.cfg }

// URL returns "http://host:port" once Start has succeeded, else "".
func (r *Replica) URL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addr == "" {
		return ""
	}
	return "http://" + r.addr
}

// Stats returns the engine's counters as of now.
func (r *Replica) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advanceLocked()
	return r.eng.Stats()
}

// Faults returns the faults being injected.
func (r *Replica) Faults() Faults {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.faults
}

// SetFaults replaces the faults being injected. Crash set crashes the
// replica.
func (r *Replica) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	r.mu.Lock()
	r.faults = f
	r.faults.Crash = false
	r.mu.Unlock()
	if f.Crash {
		r.Crash()
	}
	return nil
}

// Crash stops the replica as if its process died: in-flight requests lose
// their connections, later requests are refused (own listener closed) or
// dropped (foreign server), and the engine's state is lost.
func (r *Replica) Crash() {
	r.mu.Lock()
	if r.crashed {
		r.mu.Unlock()
		return
	}
	r.crashed = true
	close(r.crashCh)
	r.resetEngineLocked()
	r.responses.reset()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Restart brings a crashed replica back with an empty cache, listening on its
// old address if it had one. Faults are cleared.
func (r *Replica) Restart() error {
	r.mu.Lock()
	addr := r.addr
	r.crashed = false
	r.crashCh = make(chan struct{})
	r.faults = Faults{}
	r.resetEngineLocked()
	hasSrv := r.srv != nil
	r.mu.Unlock()
	if addr == "" || hasSrv {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	r.serve(ln)
	return nil
}

func (r *Replica) resetEngineLocked() {
	r.eng, _ = NewEngine(r.cfg.Engine)
	r.waiters = make(map[RequestID]*waiter)
}

// Start listens on addr ("host:port", port 0 for an ephemeral one) and
// serves in the background.
func (r *Replica) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	r.serve(ln)
	return nil
}

func (r *Replica) serve(ln net.Listener) {
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.addr = ln.Addr().String()
	r.mu.Unlock()
	go srv.Serve(ln)
}

// Shutdown stops serving gracefully: the listener closes and in-flight
// requests finish (or ctx ends). The engine keeps running until Close.
func (r *Replica) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Shutdown(ctx)
}

// Close stops the replica's server (if any) at once and its engine goroutine.
func (r *Replica) Close() error {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	r.closing.Do(func() { close(r.stop) })
	<-r.loopDone
	return err
}

// vnow returns the engine time now.
func (r *Replica) vnow() time.Time {
	return r.wallStart.Add(time.Duration(float64(time.Since(r.wallStart)) * r.cfg.Speed))
}

func (r *Replica) advanceLocked() {
	for _, ev := range r.eng.Advance(r.vnow()) {
		w := r.waiters[ev.ID]
		if w == nil {
			continue
		}
		switch ev.Kind {
		case EventFirstToken:
			w.first <- ev
		case EventFinished:
			w.done <- ev
			delete(r.waiters, ev.ID)
		}
	}
}

func (r *Replica) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// loop advances the engine at its event times.
func (r *Replica) loop() {
	defer close(r.loopDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		r.advanceLocked()
		wait := time.Hour
		if t, ok := r.eng.NextEvent(); ok {
			wait = time.Duration(float64(t.Sub(r.vnow()))/r.cfg.Speed) + 1
			wait = max(wait, 0)
		}
		r.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-r.wake:
		case <-r.stop:
			return
		}
	}
}

// submit queues req and returns its id, its waiter and the crash channel.
func (r *Replica) submit(req Request) (RequestID, *waiter, <-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.crashed {
		return 0, nil, nil, errCrashed
	}
	r.advanceLocked()
	id, err := r.eng.Submit(r.vnow(), req)
	if err != nil {
		return 0, nil, nil, err
	}
	w := &waiter{first: make(chan Event, 1), done: make(chan Event, 1)}
	r.waiters[id] = w
	r.signal()
	return id, w, r.crashCh, nil
}

func (r *Replica) cancel(id RequestID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.waiters, id)
	r.eng.Cancel(r.vnow(), id)
	r.signal()
}

// generated returns how many tokens request id has produced so far.
func (r *Replica) generated(id RequestID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advanceLocked()
	n, _ := r.eng.Generated(id)
	return n
}

var errCrashed = errors.New("vllmsim: replica crashed")

// resolveModel maps a request's model name to a LoRA adapter ("" = base).
func (r *Replica) resolveModel(model string) (string, bool) {
	if model == "" || model == r.cfg.Model {
		return "", true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.ContainsFunc(r.adapters, func(a adapter) bool { return a.name == model }) {
		return model, true
	}
	return "", false
}

func (r *Replica) randFloat() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Float64()
}

// newUnderscoreID returns an id like "resp_0123…", the Responses API's form.
func (r *Replica) newUnderscoreID(prefix string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%s_%016x%016x", prefix, r.rng.Uint64(), r.rng.Uint64())
}

func (r *Replica) newID(prefix string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%s-%016x%016x", prefix, r.rng.Uint64(), r.rng.Uint64())
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
