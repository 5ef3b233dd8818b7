package flowcontrol

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

func item(id string, prio, prompt int) *Item {
	return &Item{Flow: Flow{FairnessID: id, Priority: prio}, PromptTokens: prompt, Bytes: 100}
}

func mustPush(t *testing.T, q *Queue, it *Item, now time.Time) {
	t.Helper()
	if err := q.Push(it, now); err != nil {
		t.Fatalf("Push %+v: %v", it.Flow, err)
	}
}

func shedReason(err error) Reason {
	var se *ShedError
	if errors.As(err, &se) {
		return se.Reason
	}
	return ""
}

func TestStrictPriorityAndFCFS(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{}))
	a1, a2 := item("a", 0, 10), item("a", 0, 10)
	hi := item("b", 5, 10)
	mid := item("c", 2, 10)
	for i, it := range []*Item{a1, a2, hi, mid} {
		mustPush(t, q, it, t0.Add(time.Duration(i)))
	}
	for prio, want := range map[int]int{6: 0, 5: 1, 2: 2, 0: 4, -3: 4} {
		if got := q.Ahead(prio); got != want {
			t.Errorf("Ahead(%d) = %d; want %d", prio, got, want)
		}
	}
	for i, want := range []*Item{hi, mid, a1, a2} {
		if got := q.Pop(); got != want {
			t.Fatalf("pop %d = %+v; want %+v", i, got.Flow, want.Flow)
		}
	}
	if q.Pop() != nil || q.Peek() != nil || q.Len() != 0 {
		t.Fatal("queue not empty")
	}
}

// Two flows of one band, one with prompts ten times longer: by served
// tokens, the short-prompt flow is popped ten times as often, and the
// counters never part by more than one request's cost.
func TestFairByServedTokens(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{PromptWeight: 1}))
	long, short := Flow{"long", 0}, Flow{"short", 0}
	for i := range 200 {
		mustPush(t, q, &Item{Flow: long, PromptTokens: 1000}, t0.Add(time.Duration(i)))
		mustPush(t, q, &Item{Flow: short, PromptTokens: 100}, t0.Add(time.Duration(i)))
	}
	pops := map[string]int{}
	for range 110 {
		it := q.Pop()
		pops[it.Flow.FairnessID]++
		cl, _ := q.Counter(long)
		cs, _ := q.Counter(short)
		if d := cl - cs; d > 1000 || d < -1000 {
			t.Fatalf("counters %v and %v part by more than one request", cl, cs)
		}
	}
	if pops["long"] != 10 || pops["short"] != 100 {
		t.Errorf("pops %v; want long 10, short 100", pops)
	}
	p, o, _ := q.Served(short)
	if p != 100*100 || o != 0 {
		t.Errorf("Served(short) = %d, %d", p, o)
	}
}

// A flow idle while another was served does not bank the idle time: on
// arrival it starts at the band's least counter and the two alternate.
func TestNoBankingIdleTime(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{PromptWeight: 1}))
	a, b := Flow{"a", 0}, Flow{"b", 0}
	for i := range 100 {
		mustPush(t, q, &Item{Flow: a, PromptTokens: 10}, t0.Add(time.Duration(i)))
	}
	for range 50 {
		q.Pop()
	}
	for i := range 50 {
		mustPush(t, q, &Item{Flow: b, PromptTokens: 10}, t0.Add(time.Duration(100+i)))
	}
	run := 0
	for range 40 {
		if q.Pop().Flow == b {
			run++
			if run > 2 {
				t.Fatal("the late flow was served more than twice in a row")
			}
		} else {
			run = 0
		}
	}
}

// Work served while nobody in the band waited is no debt: when contention
// starts the flows start level.
func TestNoDebtForUncontendedWork(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{}))
	a, b := Flow{"a", 0}, Flow{"b", 0}
	q.Charge(a, 1_000_000, 1_000_000)
	q.Charge(b, 10, 1)
	for i := range 10 {
		mustPush(t, q, &Item{Flow: a, PromptTokens: 10}, t0.Add(time.Duration(i)))
		mustPush(t, q, &Item{Flow: b, PromptTokens: 10}, t0.Add(time.Duration(i)))
	}
	seen := map[Flow]int{}
	for range 4 {
		seen[q.Pop().Flow]++
	}
	if seen[a] != 2 || seen[b] != 2 {
		t.Errorf("first four pops %v; want two each", seen)
	}
}

func TestRemove(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{}))
	its := []*Item{item("a", 0, 1), item("a", 0, 1), item("a", 0, 1), item("b", 0, 1)}
	for i, it := range its {
		mustPush(t, q, it, t0.Add(time.Duration(i)))
	}
	if pos := q.Position(its[2]); pos.AheadInFlow != 2 || pos.BandQueued != 4 {
		t.Errorf("Position = %+v", pos)
	}
	if !q.Remove(its[1]) || q.Remove(its[1]) || its[1].Queued() {
		t.Fatal("Remove of a queued item must succeed once")
	}
	if !q.Remove(its[3]) || q.Len() != 2 {
		t.Fatalf("Len %d", q.Len())
	}
	if n, by := q.BandLen(0); n != 2 || by != 200 {
		t.Errorf("BandLen = %d, %d", n, by)
	}
	if q.Pop() != its[0] || q.Pop() != its[2] || q.Pop() != nil {
		t.Error("order after Remove")
	}
	if q.Remove(its[0]) {
		t.Error("Remove of a popped item")
	}
}

func TestTTL(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{
		Objectives: map[string]int{"hi": 1},
		Bands:      map[string]BandLimits{"hi": {TTL: time.Second}},
	}))
	old, young, hi := item("a", 0, 1), item("a", 0, 1), item("b", 1, 1)
	mustPush(t, q, old, t0)
	mustPush(t, q, hi, t0)
	mustPush(t, q, young, t0.Add(30*time.Second))
	if next, ok := q.NextExpiry(); !ok || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextExpiry = %v %v", next, ok)
	}
	var gone []*Item
	if n := q.Expire(t0.Add(time.Second), func(it *Item) { gone = append(gone, it) }); n != 1 || gone[0] != hi {
		t.Fatalf("expired %d", n)
	}
	if n := q.Expire(t0.Add(DefaultTTL-1), nil); n != 0 {
		t.Fatalf("expired %d before the TTL", n)
	}
	if n := q.Expire(t0.Add(DefaultTTL), nil); n != 1 || old.Queued() || !young.Queued() {
		t.Fatalf("expired %d at the TTL", n)
	}
}

func TestCapsAndShedding(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{BandDefaults: BandLimits{MaxRequests: 2, MaxBytes: 250}}))
	mustPush(t, q, item("a", 0, 1), t0)
	if r := shedReason(q.Push(item("a", -1, 1), t0)); r != ReasonSheddable {
		t.Errorf("sheddable: %q", r)
	}
	mustPush(t, q, item("b", 0, 1), t0)
	if r := shedReason(q.Push(item("c", 0, 1), t0)); r != ReasonQueueFull {
		t.Errorf("full: %q", r)
	}
	big := item("c", 3, 1)
	big.Bytes = 251
	if err := q.Push(big, t0); shedReason(err) != ReasonQueueBytes || !errors.Is(err, ErrShed) {
		t.Errorf("bytes: %v", err)
	}
	it := item("a", 0, 1)
	mustPush(t, NewQueue(testPolicy(t, Config{})), it, t0)
	if err := q.Push(it, t0); err == nil {
		t.Error("pushing a queued item twice succeeded")
	}
}

func TestBoundedFlowsAndBands(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{MaxFlows: 2}))
	a, b := item("a", 0, 1), item("b", 0, 1)
	mustPush(t, q, a, t0)
	mustPush(t, q, b, t0)
	if r := shedReason(q.Push(item("c", 0, 1), t0)); r != ReasonFlows {
		t.Fatalf("third flow while two are backlogged: %q", r)
	}
	q.Pop() // a idles and is the least recently used
	q.Charge(Flow{"x", 0}, 1, 1)
	if _, ok := q.Counter(Flow{"a", 0}); ok || q.Flows() != 2 {
		t.Fatalf("idle flow not forgotten: %d flows", q.Flows())
	}
	q2 := NewQueue(testPolicy(t, Config{MaxFlows: MaxBands + 10}))
	for p := range MaxBands {
		mustPush(t, q2, item("a", p, 1), t0)
	}
	if r := shedReason(q2.Push(item("a", MaxBands, 1), t0)); r != ReasonBands {
		t.Fatalf("band %d: %q", MaxBands, r)
	}
	if q2.Pop().Flow.Priority != MaxBands-1 {
		t.Fatal("highest band first")
	}
}

func TestShedErrorMessage(t *testing.T) {
	err := error(&ShedError{Reason: ReasonTTL, Flow: Flow{"acme", 3}})
	if got := fmt.Sprint(err); got != `flowcontrol: request of flow "acme" priority 3 shed: ttl` {
		t.Error(got)
	}
}
