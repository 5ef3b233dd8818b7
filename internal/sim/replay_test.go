package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// placedWorkload is 8 requests over 4 documents on 4 replicas, each
// request placed on replica place(i).
func placedWorkload(t *testing.T, place func(i int) int) *Workload {
	t.Helper()
	preset, err := vllmsim.LookupPreset("llamacpp-tiny-cpu")
	if err != nil {
		t.Fatal(err)
	}
	w := &Workload{Name: "placed", Replicas: 4, Engine: preset.Engine}
	for i := range 8 {
		w.Requests = append(w.Requests, &Request{
			At: time.Duration(i) * time.Second,
			Messages: []Message{
				{Role: "system", Content: []Segment{{ID: uint64(1 + i%4), Tokens: 300}}},
				{Role: "user", Content: []Segment{{ID: uint64(100 + i), Tokens: 10}}},
			},
			Output: 2, Placed: true, Replica: place(i),
		})
	}
	return w
}

// TestReplayPlacement: the replay policy puts every request on its
// recorded replica, so the cache follows the recording: the same documents
// on the same replica find their prefix again, spread over replicas they
// never do.
func TestReplayPlacement(t *testing.T) {
	run := func(place func(int) int) PolicyResult {
		rep, err := Simulate(placedWorkload(t, place), Options{Policies: []string{ReplayPolicy}, Parallel: 1})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Policies[0]
	}
	affine := run(func(i int) int { return i % 4 })            // document d on replica d
	scattered := run(func(i int) int { return (i + i/4) % 4 }) // second visit one replica on
	oneReplica := run(func(int) int { return 2 })
	if affine.Role != RoleReplay {
		t.Errorf("role %q, want %q", affine.Role, RoleReplay)
	}
	for name, p := range map[string]PolicyResult{"affine": affine, "scattered": scattered} {
		for r, s := range p.Share {
			if s != 0.25 {
				t.Errorf("%s: replica %d share %.3f, want 0.25 (2 of 8 recorded there)", name, r, s)
			}
		}
	}
	if oneReplica.Share[2] != 1 {
		t.Errorf("all recorded on replica 2: shares %v", oneReplica.Share)
	}
	// RequestTTFTs are in workload order: a document's second visit finds
	// its prefix cached on its replica and answers sooner than its first.
	for i := range 4 {
		if first, second := affine.RequestTTFTs[i], affine.RequestTTFTs[i+4]; !(second < first/2) {
			t.Errorf("document %d: second visit TTFT %.1f ms, want under half the first's %.1f ms", i, second, first)
		}
	}
	// Second visits are half the requests and hit all but their question.
	if affine.HitRate < 0.4 || scattered.HitRate != 0 || oneReplica.HitRate < 0.4 {
		t.Errorf("hit rates: affine %.3f (want ≥ 0.4), scattered %.3f (want 0), one replica %.3f (want ≥ 0.4)",
			affine.HitRate, scattered.HitRate, oneReplica.HitRate)
	}
}

func TestReplayErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(w *Workload)
		opts     Options
		contains string
	}{
		{"not placed", func(w *Workload) { w.Requests[3].Placed = false }, Options{}, "request 3 (at 3s) carries no recorded replica"},
		{"outside the fleet", func(w *Workload) { w.Requests[5].Replica = 4 }, Options{}, "request 5 (at 5s) was placed on replica 4, outside 0..3"},
		{"negative", func(w *Workload) { w.Requests[0].Replica = -1 }, Options{}, "placed on replica -1"},
		{"fewer replicas", func(*Workload) {}, Options{Replicas: 2}, "outside 0..1"},
		{"scale", func(*Workload) {}, Options{Scale: []ScaleEvent{{}}}, "takes no scale events"},
	} {
		w := placedWorkload(t, func(i int) int { return i % 4 })
		tc.edit(w)
		tc.opts.Policies = []string{"random", ReplayPolicy}
		_, err := Simulate(w, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.contains)
		}
	}
}
