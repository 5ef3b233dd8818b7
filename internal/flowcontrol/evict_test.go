package flowcontrol

import (
	"testing"
	"time"
)

func TestFullBandEvictsLongestFlow(t *testing.T) {
	pol := testPolicy(t, Config{BandDefaults: BandLimits{MaxRequests: 4}})
	q := NewQueue(pol)
	var heavy []*Item
	for i := range 4 {
		it := item("heavy", 0, 100)
		mustPush(t, q, it, t0.Add(time.Duration(i)))
		heavy = append(heavy, it)
	}
	// Without OnEvict the full band refuses the light tenant.
	if got := shedReason(q.Push(item("light", 0, 10), t0)); got != ReasonQueueFull {
		t.Fatalf("full band without OnEvict: reason %q, want %q", got, ReasonQueueFull)
	}
	var evicted []*Item
	q.OnEvict(func(it *Item) { evicted = append(evicted, it) })
	light := item("light", 0, 10)
	mustPush(t, q, light, t0.Add(time.Second))
	if len(evicted) != 1 || evicted[0] != heavy[3] || heavy[3].Queued() {
		t.Fatalf("evicted %v, want the heavy flow's newest request", evicted)
	}
	if q.Len() != 4 || !light.Queued() {
		t.Fatalf("queue holds %d, light queued %v", q.Len(), light.Queued())
	}
	// The heavy flow's own arrival is still refused: it is the longest.
	if got := shedReason(q.Push(item("heavy", 0, 100), t0)); got != ReasonQueueFull {
		t.Errorf("heavy arrival at a full band: reason %q, want %q", got, ReasonQueueFull)
	}
	// Two flows level within one request: nobody is evicted.
	mustPush(t, q, item("light", 0, 10), t0.Add(2*time.Second)) // evicts heavy[2]: 2 heavy, 2 light
	if got := shedReason(q.Push(item("light", 0, 10), t0)); got != ReasonQueueFull || len(evicted) != 2 {
		t.Errorf("level flows: reason %q, %d evicted; want %q and 2", got, len(evicted), ReasonQueueFull)
	}
}

func TestFullBandBytesEvict(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{BandDefaults: BandLimits{MaxBytes: 300}}))
	for i := range 3 {
		mustPush(t, q, item("heavy", 0, 1), t0.Add(time.Duration(i))) // 100 bytes each
	}
	n := 0
	q.OnEvict(func(*Item) { n++ })
	mustPush(t, q, item("light", 0, 1), t0)
	if n != 1 || q.Len() != 3 {
		t.Errorf("evicted %d, queue %d; want 1 and 3", n, q.Len())
	}
}
