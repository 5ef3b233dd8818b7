package flowcontrol

import (
	"math/rand/v2"
	"testing"
	"time"
)

// model is the test's own record of what is queued, to check the queue
// against.
type model struct {
	queued map[*Item]int // push sequence
	seq    int
}

func (m *model) maxPriority() int {
	best := -1 << 62
	for it := range m.queued {
		best = max(best, it.Flow.Priority)
	}
	return best
}

// checkPop verifies a popped item against the model: strict priority
// across bands, the least counter among its band's backlogged flows, and
// first come first served within its flow.
func (m *model) checkPop(t *testing.T, q *Queue, it *Item, counters map[Flow]float64) {
	t.Helper()
	if it.Flow.Priority != m.maxPriority() {
		t.Fatalf("popped priority %d while %d is queued", it.Flow.Priority, m.maxPriority())
	}
	mine := counters[it.Flow]
	for other := range m.queued {
		if other.Flow.Priority != it.Flow.Priority {
			continue
		}
		if c := counters[other.Flow]; c < mine {
			t.Fatalf("popped flow %v with counter %v; %v has %v", it.Flow, mine, other.Flow, c)
		}
		if other.Flow == it.Flow && m.queued[other] < m.queued[it] {
			t.Fatalf("flow %v popped out of order", it.Flow)
		}
	}
	delete(m.queued, it)
}

func (m *model) checkLens(t *testing.T, q *Queue) {
	t.Helper()
	if q.Len() != len(m.queued) {
		t.Fatalf("Len %d; model %d", q.Len(), len(m.queued))
	}
	bands := map[int]int{}
	for it := range m.queued {
		bands[it.Flow.Priority]++
	}
	for p, n := range bands {
		if got, _ := q.BandLen(p); got != n {
			t.Fatalf("BandLen(%d) = %d; model %d", p, got, n)
		}
	}
}

func TestQueueProperties(t *testing.T) {
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 7))
		q := NewQueue(testPolicy(t, Config{MaxFlows: 12, BandDefaults: BandLimits{MaxRequests: 40, TTL: time.Minute}}))
		m := &model{queued: map[*Item]int{}}
		now := t0
		for range 3000 {
			now = now.Add(time.Duration(r.IntN(200)) * time.Millisecond)
			propStep(t, r, q, m, now)
			m.checkLens(t, q)
		}
	}
}

func propStep(t *testing.T, r *rand.Rand, q *Queue, m *model, now time.Time) {
	switch op := r.IntN(10); {
	case op < 5:
		it := item(string(rune('a'+r.IntN(16))), r.IntN(3), 1+r.IntN(500))
		if err := q.Push(it, now); err == nil {
			m.seq++
			m.queued[it] = m.seq
		} else if shedReason(err) != ReasonQueueFull && shedReason(err) != ReasonFlows {
			t.Fatalf("Push: %v", err)
		}
	case op < 8:
		counters := map[Flow]float64{}
		for it := range m.queued {
			counters[it.Flow], _ = q.Counter(it.Flow)
		}
		if it := q.Pop(); it != nil {
			m.checkPop(t, q, it, counters)
		} else if len(m.queued) > 0 {
			t.Fatal("Pop nil while items are queued")
		}
	case op < 9:
		for it := range m.queued {
			if !q.Remove(it) {
				t.Fatal("Remove of a queued item failed")
			}
			delete(m.queued, it)
			break
		}
	default:
		q.Charge(Flow{string(rune('a' + r.IntN(16))), r.IntN(3)}, r.IntN(100), r.IntN(100))
		q.Expire(now, func(it *Item) {
			if now.Sub(it.Enqueued()) < time.Minute {
				t.Fatalf("expired after %v", now.Sub(it.Enqueued()))
			}
			delete(m.queued, it)
		})
		for it := range m.queued {
			if !it.Deadline().After(now) {
				t.Fatal("an item past its deadline is still queued")
			}
		}
	}
}

// No flow of a band starves: with every flow backlogged, a flow waits at
// most a bounded number of pops (here requests cost 1..maxCost tokens, so
// at most flows*maxCost pops pass between two of a flow's).
func TestNoStarvation(t *testing.T) {
	const flows, maxCost = 8, 20
	r := rand.New(rand.NewPCG(1, 2))
	q := NewQueue(testPolicy(t, Config{PromptWeight: 1}))
	last := map[string]int{}
	push := func(id string, i int) {
		mustPush(t, q, &Item{Flow: Flow{id, 0}, PromptTokens: 1 + r.IntN(maxCost)}, t0.Add(time.Duration(i)))
	}
	for f := range flows {
		id := string(rune('a' + f))
		for i := range 5 {
			push(id, i)
		}
		last[id] = 0
	}
	for i := 1; i <= 5000; i++ {
		it := q.Pop()
		id := it.Flow.FairnessID
		if gap := i - last[id]; gap > flows*maxCost {
			t.Fatalf("flow %s waited %d pops", id, gap)
		}
		last[id] = i
		push(id, i) // stays backlogged
		for other, at := range last {
			if i-at > flows*maxCost {
				t.Fatalf("flow %s starved for %d pops", other, i-at)
			}
		}
	}
}
