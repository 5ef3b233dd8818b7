package flowgate

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/pipeline"
)

// answered receives out's answer, fails on an error, and returns it.
func answered(t *testing.T, name string, out chan pickOut) pickOut {
	t.Helper()
	r := <-out
	if r.err != nil {
		t.Fatalf("%s: %v", name, r.err)
	}
	return r
}

// TestReconfigureKeepsQueued: with the fleet saturated and requests
// queued, a new configuration drops an objective, adds one and lowers the
// band cap: Identify refuses the dropped objective with a 400 and accepts
// the new one, the lower cap refuses an arrival, and every queued request
// is served, the new band first and the band whose objective was dropped
// in its place.
func TestReconfigureKeepsQueued(t *testing.T) {
	g, _ := newGate(t, Config{Objectives: objectives, MaxQueuedRequests: 3})
	ctx := context.Background()
	a, b := answered(t, "a", acquire(g, ctx, "x", 0)), answered(t, "b", acquire(g, ctx, "x", 0))
	chat1 := acquire(g, ctx, "chat", 10)
	queuedCount(t, g, 1)
	chat2 := acquire(g, ctx, "chat", 10)
	queuedCount(t, g, 2)
	flood := acquire(g, ctx, "flood", 0)
	queuedCount(t, g, 3)

	bad := Config{Objectives: map[string]string{"x": "high"}}
	if err := g.Reconfigure(bad); err == nil || !strings.Contains(err.Error(), "flow_control.objectives.x") {
		t.Fatalf("invalid configuration: %v", err)
	}
	next := Config{Objectives: map[string]string{"standard": "0", "urgent": "20"}, MaxQueuedRequests: 1}
	if err := g.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	_, err := g.Identify(http.Header{ObjectiveHeader: {"interactive"}}, "", "")
	var pe *pipeline.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || pe.Code != "unknown_objective" || !strings.Contains(pe.Message, "urgent") {
		t.Fatalf("the dropped objective: %v", err)
	}
	id, err := g.Identify(http.Header{ObjectiveHeader: {"urgent"}}, "", "")
	if err != nil || id.Flow.Priority != 20 || id.Objective != "urgent" {
		t.Fatalf("the added objective: %+v, %v", id, err)
	}
	if r := <-acquire(g, ctx, "other", 0); !errors.As(r.err, &pe) || pe.Code != "flow_control_queue_full" {
		t.Fatalf("an arrival at a band over the new cap of 1: %v", r.err)
	}
	urgent := acquire(g, ctx, "vip", id.Flow.Priority)
	queuedCount(t, g, 4)

	a.d.Done()
	u := answered(t, "urgent", urgent)
	u.d.Done()
	c1 := answered(t, "first request of the dropped objective", chat1)
	c1.d.Done()
	c2 := answered(t, "second request of the dropped objective", chat2)
	c2.d.Done()
	f := answered(t, "flood", flood)
	f.d.Done()
	b.d.Done()
	for _, r := range []pickOut{u, c1, c2, f} {
		if !r.adm.Queued {
			t.Errorf("%+v did not queue", r.adm)
		}
	}
	queuedCount(t, g, 0)
}

// TestReconfigureTTL: a shorter TTL applies to a request already waiting:
// it is answered with the TTL's 429.
func TestReconfigureTTL(t *testing.T) {
	g, _ := newGate(t, Config{})
	ctx := context.Background()
	a, b := answered(t, "a", acquire(g, ctx, "x", 0)), answered(t, "b", acquire(g, ctx, "x", 0))
	waiting := acquire(g, ctx, "y", 0)
	queuedCount(t, g, 1)
	if err := g.Reconfigure(Config{TTL: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var pe *pipeline.Error
	if r := <-waiting; !errors.As(r.err, &pe) || pe.Code != "flow_control_ttl" {
		t.Fatalf("waiting past the new TTL: %v", r.err)
	}
	a.d.Done()
	b.d.Done()
}

// TestReconfigureOff: turned off with requests queued, the gate reports
// it is off (callers bypass it) and still dispatches every queued
// request; turned on again, a request of a saturated fleet queues in it.
func TestReconfigureOff(t *testing.T) {
	g, _ := newGate(t, Config{Objectives: objectives})
	ctx := context.Background()
	a, b := answered(t, "a", acquire(g, ctx, "x", 0)), answered(t, "b", acquire(g, ctx, "x", 0))
	q1 := acquire(g, ctx, "y", 10)
	queuedCount(t, g, 1)
	q2 := acquire(g, ctx, "z", 0)
	queuedCount(t, g, 2)
	off := false
	if err := g.Reconfigure(Config{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if g.Enabled() {
		t.Fatal("still enabled")
	}
	a.d.Done()
	r1 := answered(t, "queued before turning off", q1)
	b.d.Done()
	r2 := answered(t, "second queued before turning off", q2)
	if err := g.Reconfigure(Config{Objectives: objectives}); err != nil || !g.Enabled() {
		t.Fatalf("turning on: %v, enabled %v", err, g.Enabled())
	}
	q3 := acquire(g, ctx, "w", 0)
	queuedCount(t, g, 1)
	r1.d.Done()
	r3 := answered(t, "queued after turning on", q3)
	if !r3.adm.Queued {
		t.Error("a request of a saturated fleet did not queue after turning on")
	}
	r2.d.Done()
	r3.d.Done()
}

// TestReconfigureConcurrent: requests identify, queue and are served
// while the configuration changes under them (run with -race).
func TestReconfigureConcurrent(t *testing.T) {
	g, _ := newGate(t, Config{Objectives: objectives})
	cfgs := []Config{{Objectives: objectives, EnginePriority: true}, {Objectives: map[string]string{"interactive": "5"}, TTL: time.Minute}}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				id, err := g.Identify(http.Header{ObjectiveHeader: {"interactive"}}, "", "")
				if err != nil {
					errs <- err
					return
				}
				g.EnginePriority("priority", false, true, id.Flow.Priority)
				r := <-acquire(g, ctx, string(rune('a'+i)), id.Flow.Priority)
				if r.err != nil {
					errs <- r.err
					return
				}
				r.d.Done()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for i := 0; ; i++ {
		if err := g.Reconfigure(cfgs[i%2]); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		default:
			time.Sleep(50 * time.Microsecond)
			continue
		}
		break
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
