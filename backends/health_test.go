package backends

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable clock for the backoff arithmetic.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// stateLog records OnState calls, with the backend's Healthy as the
// callee sees it, and fails the test if a call came with the backend's
// lock held (the callee must be free to call back into the pool).
type stateLog struct {
	t      *testing.T
	mu     sync.Mutex
	states []State
	health []bool
}

func (l *stateLog) onState(b *Backend, s State) {
	if !b.mu.TryLock() {
		l.t.Error("OnState called with the backend's lock held")
	} else {
		b.mu.Unlock()
	}
	l.mu.Lock()
	l.states = append(l.states, s)
	l.health = append(l.health, b.Healthy())
	l.mu.Unlock()
}

func (l *stateLog) get() ([]State, []bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.states), slices.Clone(l.health)
}

// TestFlappingHealth drives the state machine with real /health probes
// against a server whose answer the test flips, and a fake clock for the
// backoff.
func TestFlappingHealth(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	log := stateLog{t: t}
	const base, maxBackoff = time.Second, 4 * time.Second
	p, err := NewPool([]string{srv.URL}, Options{
		FailThreshold: 2, RiseThreshold: 3, EjectBackoff: base, MaxEjectBackoff: maxBackoff,
		ProbeTimeout: 10 * time.Second, OnState: log.onState,
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	p.now = clock.now
	b := p.Backends()[0]
	ctx := context.Background()
	// probe runs one round the way Run does: backends in backoff are skipped.
	probe := func(n int) {
		for range n {
			p.probeDue(ctx)
		}
	}
	want := func(step string, s State) {
		t.Helper()
		if got := b.State(); got != s {
			t.Fatalf("%s: state %v, want %v", step, got, s)
		}
	}

	up.Store(false)
	probe(1)
	want("one failed probe (fall threshold 2)", StateHealthy)
	probe(1)
	want("two failed probes", StateEjected)

	up.Store(true)
	probe(5)
	want("healthy probes inside the first backoff", StateEjected)
	clock.advance(base)
	probe(2)
	want("two healthy probes after backoff (rise threshold 3)", StateEjected)
	probe(1)
	want("three healthy probes after backoff", StateHealthy)

	// It flaps: the second ejection holds it out twice as long.
	up.Store(false)
	probe(2)
	want("flap 2", StateEjected)
	up.Store(true)
	clock.advance(base)
	probe(5)
	want("healthy probes after one base backoff on the second ejection", StateEjected)
	clock.advance(base)
	probe(3)
	want("after twice the base backoff", StateHealthy)

	// Flap until the backoff reaches its cap, then once more: still the cap.
	for i, hold := range []time.Duration{4 * base, maxBackoff, maxBackoff} {
		up.Store(false)
		probe(2)
		want("flap", StateEjected)
		up.Store(true)
		clock.advance(hold - time.Millisecond)
		probe(3)
		want("just before the capped backoff", StateEjected)
		clock.advance(time.Millisecond)
		probe(3)
		if b.State() != StateHealthy {
			t.Fatalf("flap %d: not back after %v", i, hold)
		}
	}

	// Healthy for a full MaxEjectBackoff: the next ejection starts over.
	clock.advance(maxBackoff)
	up.Store(false)
	probe(2)
	up.Store(true)
	clock.advance(base)
	probe(3)
	want("after a long healthy spell the backoff is the base again", StateHealthy)

	states, health := log.get()
	if len(states) != 12 || len(health) != 12 {
		t.Fatalf("got %d state and %d health callbacks, want 12 each: %v %v", len(states), len(health), states, health)
	}
	for i, s := range states {
		wantS := StateEjected
		if i%2 == 1 {
			wantS = StateHealthy
		}
		if s != wantS || health[i] != (s == StateHealthy) {
			t.Fatalf("callback %d: %v/%v, want %v", i, s, health[i], wantS)
		}
	}
}

func TestPassiveEjectionAndDrain(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	log := stateLog{t: t}
	p, err := NewPool([]string{srv.URL}, Options{FailThreshold: 3, RiseThreshold: 1, EjectBackoff: time.Second,
		OnState: log.onState})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	p.now = clock.now
	b := p.Backends()[0]

	b.Observe(nil, 500)
	b.Observe(nil, 502)
	b.Observe(nil, 200) // a success breaks the streak
	b.Observe(nil, 500)
	b.Observe(nil, 503)
	if !b.Healthy() {
		t.Fatal("ejected before FailThreshold failures in a row")
	}
	b.Observe(nil, 500)
	if b.State() != StateEjected {
		t.Fatalf("state %v after 3 failures in a row, want ejected", b.State())
	}
	p.ProbeAll(context.Background())
	if b.State() != StateEjected {
		t.Fatal("a probe returned a passively ejected backend inside its backoff")
	}
	clock.advance(time.Second)
	p.ProbeAll(context.Background())
	if !b.Healthy() {
		t.Fatalf("state %v after backoff and a good probe", b.State())
	}

	if !p.Drain(b.Name) || b.State() != StateDraining || b.Healthy() {
		t.Fatalf("Drain: state %v", b.State())
	}
	p.ProbeAll(context.Background())
	if b.State() != StateDraining {
		t.Fatalf("a probe undid Drain: %v", b.State())
	}
	p.Undrain(b.Name)
	if !b.Healthy() {
		t.Fatalf("Undrain: state %v", b.State())
	}
	if p.Drain("nope:1") {
		t.Fatal("Drain of an unknown backend reported true")
	}
	states, health := log.get()
	if want := []State{StateEjected, StateHealthy, StateDraining, StateHealthy}; !slices.Equal(states, want) {
		t.Fatalf("OnState calls %v, want %v", states, want)
	}
	if want := []bool{false, true, false, true}; !slices.Equal(health, want) {
		t.Fatalf("Healthy at OnState calls %v, want %v", health, want)
	}
}

// TestSetDrained: the configuration's drained set drains what it newly
// lists, starts a listed backend drained when it appears (never healthy in
// between), leaves an operator's Undrain alone while the name stays listed,
// and undrains what it stops listing.
func TestSetDrained(t *testing.T) {
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer b.Close()
	nameA, nameB := strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")
	log := stateLog{t: t}
	p, err := NewPool([]string{a.URL}, Options{OnState: log.onState})
	if err != nil {
		t.Fatal(err)
	}
	if absent := p.SetDrained([]string{nameB}); !slices.Equal(absent, []string{nameB}) {
		t.Fatalf("absent %v, want [%s]", absent, nameB)
	}
	if err := p.SetBackends([]string{a.URL, b.URL}); err != nil {
		t.Fatal(err)
	}
	bb, _ := p.Get(nameB)
	if bb.State() != StateDraining {
		t.Fatalf("a listed backend appeared %v, want draining", bb.State())
	}
	p.Undrain(nameB)
	if p.SetDrained([]string{nameB, nameA}) != nil {
		t.Fatal("names in the pool reported absent")
	}
	if ba, _ := p.Get(nameA); ba.State() != StateDraining || !bb.Healthy() {
		t.Fatalf("after a reload: %s %v (want draining), %s %v (the operator's undrain should stay)", nameA, ba.State(), nameB, bb.State())
	}
	p.SetDrained(nil)
	if ba, _ := p.Get(nameA); !ba.Healthy() {
		t.Fatalf("%s %v after the configuration stopped listing it", nameA, ba.State())
	}
	if states, _ := log.get(); !slices.Equal(states, []State{StateHealthy, StateDraining, StateHealthy}) {
		t.Fatalf("OnState calls %v", states)
	}
}

// TestObserveJudgesOutcomes: Observe is passive health's only input, and it
// tells the backend's failures from the client's.
func TestObserveJudgesOutcomes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	p, err := NewPool([]string{srv.URL}, Options{FailThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Backends()[0]
	for _, tc := range []struct {
		what   string
		err    error
		status int
	}{
		{"a client that left", context.Canceled, 0},
		{"a deadline of the client's", fmt.Errorf("backend x: %w", context.DeadlineExceeded), 200},
		{"a 503", nil, 503},
		{"a 404, which breaks the streak", nil, 404},
		{"a stalled stream", ErrIdleTimeout, 200},
		{"a client write error", errors.New("write: broken pipe"), 200},
	} {
		b.Observe(tc.err, tc.status)
		if !b.Healthy() {
			t.Fatalf("after %s: %v, want healthy (FailThreshold 2, no two failures in a row)", tc.what, b.State())
		}
	}
	b.Observe(nil, 500) // second failure in a row after the stalled stream
	if b.State() != StateEjected {
		t.Fatalf("after a stall and a 500 in a row: %v, want ejected", b.State())
	}

	p2, err := NewPool([]string{srv.URL}, Options{FailThreshold: 100})
	if err != nil {
		t.Fatal(err)
	}
	b2 := p2.Backends()[0]
	b2.Observe(&UnreachableError{Backend: b2.Name, Err: errors.New("connection refused")}, 0)
	if b2.State() != StateEjected {
		t.Fatalf("after an unreachable answer: %v, want ejected at once", b2.State())
	}
	var outside Backend // not from a pool: nothing to judge with
	outside.Observe(nil, 500)
}
