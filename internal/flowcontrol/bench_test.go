package flowcontrol

import (
	"testing"
	"time"
)

// BenchmarkNotSaturated is what flow control adds to a request when the
// fleet is not saturated: resolve the priority, note the band for
// headroom, judge eight members, check headroom on the chosen one, find
// the queue empty and charge the prompt and output tokens.
func BenchmarkNotSaturated(b *testing.B) {
	p := testPolicy(b, Config{
		Objectives: map[string]int{"interactive": 10, "batch": -1},
		Tenants:    map[string]Tenant{"acme": {Objective: "interactive"}},
	})
	q := NewQueue(p)
	h, _ := NewHeadroom(HeadroomConfig{})
	th := DefaultThresholds()
	members := make([]Member, 8)
	for i := range members {
		members[i] = Member{InFlight: i, Limit: 256, QueuedTokens: 100 * i, Engine: Engine{Known: true, Age: time.Second, Waiting: 0, KVUtil: 0.3}}
	}
	tenants := []string{"acme", "other", "third"}
	now := t0
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for i := range b.N {
		now = now.Add(time.Millisecond)
		res, err := p.Resolve(tenants[i%3], "")
		if err != nil {
			b.Fatal(err)
		}
		f := Flow{FairnessID: tenants[i%3], Priority: res.Priority}
		h.Saw(f.Priority, now)
		if Saturated(members, th) || q.Len() != 0 || !h.Admits(f.Priority, members[3].InFlight, members[3].Limit, now) {
			b.Fatal("saturated")
		}
		q.Charge(f, 500, 0)
		q.Charge(f, 0, 16)
	}
}

// BenchmarkPushPop is the saturated path: a request queued among 1,000
// backlogged flows and popped, with its output charged.
func BenchmarkPushPop(b *testing.B) {
	q := NewQueue(testPolicy(b, Config{BandDefaults: BandLimits{MaxRequests: 10000}}))
	items := make([]Item, 4000)
	for i := range items {
		items[i] = Item{Flow: Flow{FairnessID: string(rune(0x4e00 + i%1000)), Priority: i % 2}, PromptTokens: 100 + i%700}
		if err := q.Push(&items[i], t0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for i := range b.N {
		it := q.Pop()
		q.Charge(it.Flow, 0, 16)
		if err := q.Push(it, t0.Add(time.Duration(i))); err != nil {
			b.Fatal(err)
		}
	}
}
