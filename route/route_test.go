package route

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func fleet(n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Name: fmt.Sprintf("vllm-%d", i)}
	}
	return ms
}

func mustNew(t testing.TB, cfg Config, ms []Member) *Router {
	t.Helper()
	r, err := New(cfg, ms)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		members []Member
		field   string
	}{
		{"unknown policy", Config{Policy: "round-robin"}, nil, "Policy"},
		{"load factor below one", Config{LoadFactor: 0.9}, nil, "LoadFactor"},
		{"threshold too big", Config{DefaultThreshold: 1025}, nil, "DefaultThreshold"},
		{"threshold negative", Config{DefaultThreshold: -1}, nil, "DefaultThreshold"},
		{"vnodes negative", Config{VirtualNodes: -3}, nil, "VirtualNodes"},
		{"slack too large", Config{Slack: 5000}, nil, "Slack"},
		{"member threshold", Config{}, []Member{{Name: "a", Threshold: 2000}}, "Threshold"},
		{"member empty name", Config{}, []Member{{}}, "Name"},
		{"member twice", Config{}, []Member{{Name: "a"}, {Name: "a"}}, "Name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, tc.members)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New() error = %v, want one naming %s", err, tc.field)
			}
		})
	}
	r := mustNew(t, Config{}, nil)
	want := Config{Policy: "prefix-index", LoadFactor: 1.25, Slack: DefaultIndexSlack, VirtualNodes: 4096, DefaultThreshold: 256, QueueDepth: 256, QueueWait: DefaultQueueWait, DefaultCacheTokens: DefaultCacheTokens, DecodeWeight: DefaultDecodeWeight}
	if diff := cmp.Diff(want, r.Config()); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestReasonStrings(t *testing.T) {
	got := []string{ReasonAffinity.String(), ReasonSpill.String(), ReasonSpillChain.String(), ReasonLeastOutstanding.String(), ReasonRandom.String()}
	want := []string{"affinity", "spill", "spill-chain", "least-outstanding", "random"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

// TestPolicies runs one table per policy: a sequence of picks (held, not
// released) and the reason each must get.
func TestPolicies(t *testing.T) {
	const key = 0x1234_5678_9abc_def0
	for _, tc := range []struct {
		policy  string
		thresh  int
		picks   int
		reasons []Reason
		err     error // after picks
	}{
		// Home has threshold 2: two affinity picks, then spills.
		{"prefix-aware", 2, 3, []Reason{ReasonAffinity, ReasonAffinity, ReasonSpill}, nil},
		{"consistent-hash", 2, 5, []Reason{ReasonAffinity, ReasonAffinity, ReasonAffinity, ReasonAffinity, ReasonAffinity}, nil},
		{"least-outstanding", 1, 3, []Reason{ReasonLeastOutstanding, ReasonLeastOutstanding, ReasonLeastOutstanding}, ErrSaturated},
		{"random", 1, 3, []Reason{ReasonRandom, ReasonRandom, ReasonRandom}, ErrSaturated},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			r := mustNew(t, Config{Policy: tc.policy, DefaultThreshold: tc.thresh, LoadFactor: 100, VirtualNodes: 64, Seed: 1}, fleet(3))
			var got []Reason
			seen := map[string]int{}
			for range tc.picks {
				d, err := r.TryPick(Request{Key: key})
				if err != nil {
					t.Fatalf("TryPick: %v", err)
				}
				got = append(got, d.Reason)
				seen[d.Backend]++
				if d.Load != seen[d.Backend] {
					t.Errorf("Load = %d, want %d", d.Load, seen[d.Backend])
				}
			}
			if diff := cmp.Diff(tc.reasons, got); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			_, err := r.TryPick(Request{Key: key})
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("after %d picks: err = %v, want %v", tc.picks, err, tc.err)
			}
			if tc.policy == "least-outstanding" || tc.policy == "random" {
				if len(seen) != 3 {
					t.Errorf("threshold 1 on 3 backends: used %v", seen)
				}
			}
		})
	}
}

func TestDoneIdempotent(t *testing.T) {
	r := mustNew(t, Config{VirtualNodes: 16}, fleet(2))
	d, err := r.Pick(context.Background(), Request{Key: 7})
	if err != nil {
		t.Fatal(err)
	}
	cp := d
	d.Done()
	d.Done()
	cp.Done()
	if r.InFlight() != 0 || d.Released() != true {
		t.Fatalf("InFlight = %d after Done, want 0", r.InFlight())
	}
	// The slot is reused by the next pick; a stale copy must not release it.
	d2, _ := r.Pick(context.Background(), Request{Key: 7})
	cp.Done()
	if r.InFlight() != 1 || d2.Released() {
		t.Fatalf("stale Done released a later pick: InFlight = %d", r.InFlight())
	}
	d2.Done()
	var zero Decision
	zero.Done()
}
