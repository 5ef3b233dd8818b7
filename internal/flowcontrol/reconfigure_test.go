package flowcontrol

import (
	"strings"
	"testing"
	"time"
)

// TestSetPolicyKeepsQueued: a new policy keeps every queued item, its
// order and a band whose objective it drops; the band's new cap applies
// to arrivals (an over-cap band evicts nothing, a full one evicts as
// usual) and its new TTL to the waiting items' expiry.
func TestSetPolicyKeepsQueued(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{Objectives: map[string]int{"hi": 10, "lo": 0}, BandDefaults: BandLimits{MaxRequests: 4}}))
	var evicted []*Item
	q.OnEvict(func(it *Item) { evicted = append(evicted, it) })
	heavy := []*Item{item("heavy", 10, 1), item("heavy", 10, 1), item("heavy", 10, 1)}
	for i, it := range heavy {
		mustPush(t, q, it, t0.Add(time.Duration(i)))
	}
	low := item("a", 0, 1)
	mustPush(t, q, low, t0.Add(20*time.Second))

	q.SetPolicy(testPolicy(t, Config{Objectives: map[string]int{"lo": 0}, BandDefaults: BandLimits{MaxRequests: 2, TTL: 10 * time.Second}}))
	if q.Len() != 4 || !heavy[0].Queued() || !heavy[2].Queued() || !low.Queued() {
		t.Fatalf("after SetPolicy: %d queued", q.Len())
	}
	if r := shedReason(q.Push(item("light", 10, 1), t0.Add(time.Second))); r != ReasonQueueFull || len(evicted) != 0 {
		t.Fatalf("arrival at a band above its new cap: reason %q, %d evicted; want %q and none", r, len(evicted), ReasonQueueFull)
	}
	if it := q.Pop(); it != heavy[0] {
		t.Fatalf("popped %+v; want the oldest of the band whose objective was dropped", it.Flow)
	}
	light := item("light", 10, 1)
	mustPush(t, q, light, t0.Add(time.Second))
	if len(evicted) != 1 || evicted[0] != heavy[2] {
		t.Fatalf("evicted %d at the new cap of 2; want heavy's newest", len(evicted))
	}
	if next, ok := q.NextExpiry(); !ok || !next.Equal(heavy[1].Enqueued().Add(10*time.Second)) {
		t.Fatalf("NextExpiry = %v %v; want the new TTL from heavy's push", next, ok)
	}
	if n := q.Expire(t0.Add(10*time.Second-1), nil); n != 0 {
		t.Fatalf("expired %d before the new TTL", n)
	}
	var gone []*Item
	q.Expire(t0.Add(10*time.Second+1), func(it *Item) { gone = append(gone, it) })
	if len(gone) != 1 || gone[0] != heavy[1] || !light.Queued() || !low.Queued() {
		t.Fatalf("expired %d at the new TTL; want heavy's older request only", len(gone))
	}
	if q.Pop() != light || q.Pop() != low || q.Len() != 0 {
		t.Fatal("the rest not served in priority order")
	}
}

// TestSetPolicyFlowsAndWeight: a lower MaxFlows forgets the least
// recently used idle flows; a new prompt weight applies to later charges.
func TestSetPolicyFlowsAndWeight(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{PromptWeight: 1}))
	for _, id := range []string{"a", "b", "c", "d"} {
		q.Charge(Flow{id, 0}, 10, 0)
	}
	busy := item("e", 0, 1)
	mustPush(t, q, busy, t0)
	q.SetPolicy(testPolicy(t, Config{MaxFlows: 2, PromptWeight: 0.25}))
	if q.Flows() != 2 || !busy.Queued() {
		t.Fatalf("%d flows tracked; want 2 with the queued one", q.Flows())
	}
	if _, ok := q.Counter(Flow{"d", 0}); !ok {
		t.Fatal("the most recently used idle flow was forgotten")
	}
	q.Charge(Flow{"d", 0}, 100, 0)
	if c, _ := q.Counter(Flow{"d", 0}); c != 10+25 {
		t.Errorf("counter %v; want 35 (10 at weight 1, 100 at weight 0.25)", c)
	}
}

// TestRoomSetConfig: a new RoomConfig applies at once while what the Room
// learned stays: a member's capacity, the active bands, the last short
// prompt. An invalid one is refused and changes nothing.
func TestRoomSetConfig(t *testing.T) {
	r := newRoom(t, RoomConfig{})
	r.Saw(10, 100, t0)
	learn := Scrape{Known: true, At: t0, Running: 2, Waiting: 5}
	if f, _ := r.Fit("a", Load{InFlight: 2, Limit: 100}, learn, 0, t0); f != Full {
		t.Fatalf("at the learned capacity: %v", f)
	}
	if f, _ := r.Fit("b", Load{InFlight: 4, Limit: 8}, Scrape{}, 0, t0); f != Fits {
		t.Fatalf("with the default headroom fraction: %v", f)
	}
	if err := r.SetConfig(RoomConfig{TokenLimit: -1}); err == nil || !strings.Contains(err.Error(), "flow_control.max_queued_tokens") {
		t.Fatalf("invalid config: %v", err)
	}
	if err := r.SetConfig(RoomConfig{Headroom: HeadroomConfig{Fraction: 0.5}}); err != nil {
		t.Fatal(err)
	}
	if f, _ := r.Fit("b", Load{InFlight: 4, Limit: 8}, Scrape{}, 0, t0); f != Paced {
		t.Errorf("half of 8 kept for the active band 10: %v, want paced", f)
	}
	// The same scrape is not read again: only a kept capacity holds it.
	if f, _ := r.Fit("a", Load{InFlight: 2, Limit: 100}, Scrape{Known: true, At: t0}, 10, t0); f != Full {
		t.Errorf("capacity forgotten: %v, want full", f)
	}
	if !r.LaneFull(7, 8, t0) {
		t.Error("the last short prompt forgotten")
	}
}
