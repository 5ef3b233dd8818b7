package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// closedLoopWorkload is one client's three requests on a one-slot replica,
// all nominally at time 0, chained with FollowAnswer when chain is set.
func closedLoopWorkload(t *testing.T, chain bool) *Workload {
	t.Helper()
	preset, err := vllmsim.LookupPreset("llamacpp-tiny-cpu")
	if err != nil {
		t.Fatal(err)
	}
	w := &Workload{Name: "closed-loop", Replicas: 1, Engine: preset.Engine}
	for i := range 3 {
		w.Requests = append(w.Requests, &Request{
			Messages: []Message{{Role: "user", Content: []Segment{{ID: uint64(100 + i), Tokens: 200}}}},
			Output:   4,
		})
		if chain && i > 0 {
			if err := w.Requests[i].FollowAnswer(w.Requests[i-1], 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	return w
}

// TestFollowAnswerClosedLoop: a client that waits for each answer never
// queues behind itself, so its requests' TTFTs are alike; sent open-loop
// at once, the third waits for the two before it on the single slot.
func TestFollowAnswerClosedLoop(t *testing.T) {
	run := func(chain bool) PolicyResult {
		rep, err := Simulate(closedLoopWorkload(t, chain), Options{Policies: []string{"random"}, Parallel: 1})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Policies[0]
	}
	closed, open := run(true), run(false)
	if len(closed.TTFTs) != 3 || len(open.TTFTs) != 3 {
		t.Fatalf("want 3 answers each, got %d closed-loop, %d open-loop", len(closed.TTFTs), len(open.TTFTs))
	}
	// TTFTs are sorted: the closed loop's spread is one request's noise-free
	// service time against itself; the open loop's slowest waited for two.
	if closed.TTFTs[2] > 1.01*closed.TTFTs[0] {
		t.Errorf("closed loop: TTFTs %v differ, but no request waited for another", closed.TTFTs)
	}
	if open.TTFTs[2] < 2.5*closed.TTFTs[2] {
		t.Errorf("open loop: slowest TTFT %.1f ms is not about 3× the closed loop's %.1f ms", open.TTFTs[2], closed.TTFTs[2])
	}
}

func TestFollowAnswerErrors(t *testing.T) {
	a, b, c := &Request{}, &Request{}, &Request{}
	for _, tc := range []struct {
		name     string
		r, prev  *Request
		think    time.Duration
		contains string
	}{
		{"nil previous", a, nil, 0, "previous request is nil"},
		{"negative think", a, b, -time.Second, "negative"},
	} {
		if err := tc.r.FollowAnswer(tc.prev, tc.think); err == nil || !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.contains)
		}
	}
	if err := b.FollowAnswer(a, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.FollowAnswer(c, 0); err == nil || !strings.Contains(err.Error(), "already follows") {
		t.Errorf("second predecessor: err %v", err)
	}
	if err := c.FollowAnswer(a, 0); err == nil || !strings.Contains(err.Error(), "already has a next") {
		t.Errorf("second follower: err %v", err)
	}
	if err := a.FollowAnswer(b, 0); err == nil || !strings.Contains(err.Error(), "loop back") {
		t.Errorf("loop: err %v", err)
	}
	// A request following one the workload does not hold is refused
	// before the run, not left waiting forever.
	w := closedLoopWorkload(t, true)
	w.Requests = w.Requests[1:]
	if _, err := Simulate(w, Options{Policies: []string{"random"}}); err == nil || !strings.Contains(err.Error(), "outside the workload") {
		t.Errorf("orphan follower: err %v", err)
	}
}
