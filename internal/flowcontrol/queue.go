package flowcontrol

import (
	"errors"
	"fmt"
	"time"
)

// Reason says why a request was refused.
type Reason string

// Reasons a request is refused; they are the values of the shed metrics'
// reason label.
const (
	ReasonSheddable  Reason = "sheddable"   // priority < 0 while saturated
	ReasonQueueFull  Reason = "queue_full"  // the band holds MaxRequests
	ReasonQueueBytes Reason = "queue_bytes" // the band holds MaxBytes
	ReasonTTL        Reason = "ttl"         // waited the band's TTL
	ReasonEvicted    Reason = "evicted"     // taken out of a full band for another flow's arrival (OnEvict)
	ReasonFlows      Reason = "flows"       // MaxFlows flows all have queued requests
	ReasonBands      Reason = "bands"       // MaxBands priorities already in use
)

// ErrShed matches (errors.Is) every *ShedError.
var ErrShed = errors.New("flowcontrol: request shed")

// ShedError is a refused request. Servers answer it with 429 and
// Retry-After.
type ShedError struct {
	Reason Reason
	Flow   Flow
}

func (e *ShedError) Error() string {
	return fmt.Sprintf("flowcontrol: request of flow %q priority %d shed: %s", e.Flow.FairnessID, e.Flow.Priority, e.Reason)
}

// Is makes errors.Is(err, ErrShed) true.
func (e *ShedError) Is(target error) bool { return target == ErrShed }

// Item is a queued request. The caller owns it (embed it or allocate it)
// and fills Flow, PromptTokens, Bytes and Value before Push; the queue
// links it in place, so a push allocates nothing once the flow is known.
type Item struct {
	Flow Flow
	// PromptTokens is charged to the flow when the item is popped.
	PromptTokens int
	// Bytes counts against the band's MaxBytes.
	Bytes int64
	// Value is the caller's; the queue never reads it.
	Value any

	q             *Queue
	fs            *flowState
	b             *band
	enq, deadline time.Time
	fprev, fnext  *Item // in its flow, oldest first
	bprev, bnext  *Item // in its band, oldest first
}

// Queued reports whether the item is in a queue.
func (it *Item) Queued() bool { return it.q != nil }

// Enqueued is when the item was pushed.
func (it *Item) Enqueued() time.Time { return it.enq }

// Deadline is when the item expires (Expire) unless popped first.
func (it *Item) Deadline() time.Time { return it.deadline }

type flowState struct {
	flow         Flow
	b            *band
	counter      float64 // virtual token counter
	prompt, out  int64   // served tokens
	head, tail   *Item
	n            int
	hidx         int    // index in b.heap, -1 when not backlogged
	seq          uint64 // activation order, breaks counter ties
	lprev, lnext *flowState
	idle         bool // in the idle list
}

type band struct {
	prio       int
	lim        BandLimits
	heap       []*flowState // backlogged flows, least counter first
	head, tail *Item        // every queued item, oldest first
	n          int
	bytes      int64
	floor      float64 // the band's virtual time: no newly active flow starts below it
}

// Queue orders waiting requests: strict priority across bands, fair by
// served tokens across the flows of a band, first come first served within
// a flow. It is not safe for concurrent use; time is passed in.
type Queue struct {
	p                  *Policy
	bands              []*band // highest priority first
	flows              map[Flow]*flowState
	idleHead, idleTail *flowState // flows with nothing queued, least recently used first
	n                  int
	seq                uint64
	evict              func(*Item) // OnEvict's; nil: a full band refuses
}

// NewQueue returns an empty queue under p's limits.
func NewQueue(p *Policy) *Queue {
	return &Queue{p: p, flows: make(map[Flow]*flowState)}
}

// Len is the number of queued items.
func (q *Queue) Len() int { return q.n }

// Flows is the number of flows tracked (queued or remembered).
func (q *Queue) Flows() int { return len(q.flows) }

// BandLen is the number of items and bytes queued at priority.
func (q *Queue) BandLen(priority int) (n int, bytes int64) {
	for _, b := range q.bands {
		if b.prio == priority {
			return b.n, b.bytes
		}
	}
	return 0, 0
}

// Push queues it at time now, or refuses it with a *ShedError: a sheddable
// flow (the caller pushes only requests that must wait, so the fleet is
// saturated), a full band, or no room for another flow or band.
func (q *Queue) Push(it *Item, now time.Time) error {
	if it.Flow.Sheddable() && it.q == nil {
		return &ShedError{Reason: ReasonSheddable, Flow: it.Flow}
	}
	return q.Hold(it, now)
}

// Hold queues it at time now like Push, but a sheddable flow waits too:
// for a fleet that is not saturated but paces dispatch (its replicas hold
// as much predicted work as they should), where refusing would leave
// capacity unused. Caps, TTL and limits apply as to Push.
func (q *Queue) Hold(it *Item, now time.Time) error {
	if it.q != nil {
		return fmt.Errorf("flowcontrol: item of flow %q already queued", it.Flow.FairnessID)
	}
	b := q.band(it.Flow.Priority)
	if b == nil {
		return &ShedError{Reason: ReasonBands, Flow: it.Flow}
	}
	if it.Bytes < 0 {
		return &ShedError{Reason: ReasonQueueBytes, Flow: it.Flow}
	}
	if !q.makeRoom(b, it) {
		if b.n+1 > b.lim.MaxRequests {
			return &ShedError{Reason: ReasonQueueFull, Flow: it.Flow}
		}
		return &ShedError{Reason: ReasonQueueBytes, Flow: it.Flow}
	}
	fs := q.flow(it.Flow)
	if fs == nil {
		return &ShedError{Reason: ReasonFlows, Flow: it.Flow}
	}
	fs.b = b
	if fs.n == 0 {
		q.activate(fs)
	}
	it.q, it.fs, it.b, it.enq, it.deadline = q, fs, b, now, now.Add(b.lim.TTL)
	it.fprev, it.fnext = fs.tail, nil
	if fs.tail != nil {
		fs.tail.fnext = it
	} else {
		fs.head = it
	}
	fs.tail = it
	fs.n++
	it.bprev, it.bnext = b.tail, nil
	if b.tail != nil {
		b.tail.bnext = it
	} else {
		b.head = it
	}
	b.tail = it
	b.n++
	b.bytes += it.Bytes
	q.n++
	return nil
}

// activate makes fs backlogged: it leaves the idle list and starts no
// lower than the least counter of its band's backlogged flows, or the
// band's virtual time when none is, so idle time is not banked.
func (q *Queue) activate(fs *flowState) {
	q.unidle(fs)
	b := fs.b
	lift := b.floor
	if len(b.heap) > 0 {
		lift = b.heap[0].counter
	}
	fs.counter = max(fs.counter, lift)
	q.seq++
	fs.seq = q.seq
	fs.hidx = len(b.heap)
	b.heap = append(b.heap, fs)
	b.up(fs.hidx)
}

// Peek returns the item Pop would return, or nil.
func (q *Queue) Peek() *Item {
	for _, b := range q.bands {
		if b.n > 0 {
			return b.heap[0].head
		}
	}
	return nil
}

// Pop removes and returns the next item (nil if none) and charges its
// prompt tokens to its flow.
func (q *Queue) Pop() *Item {
	it := q.Peek()
	if it == nil {
		return nil
	}
	fs, b := it.fs, it.b
	b.floor = max(b.floor, fs.counter)
	q.Remove(it)
	q.charge(fs, it.PromptTokens, 0)
	return it
}

// Remove takes it out of the queue (a client that went away); false if it
// was not queued.
func (q *Queue) Remove(it *Item) bool {
	if it.q != q {
		return false
	}
	fs, b := it.fs, it.b
	if it.fprev != nil {
		it.fprev.fnext = it.fnext
	} else {
		fs.head = it.fnext
	}
	if it.fnext != nil {
		it.fnext.fprev = it.fprev
	} else {
		fs.tail = it.fprev
	}
	if it.bprev != nil {
		it.bprev.bnext = it.bnext
	} else {
		b.head = it.bnext
	}
	if it.bnext != nil {
		it.bnext.bprev = it.bprev
	} else {
		b.tail = it.bprev
	}
	fs.n--
	b.n--
	b.bytes -= it.Bytes
	q.n--
	if fs.n == 0 {
		b.remove(fs.hidx)
		q.toIdle(fs)
	}
	it.q, it.fs, it.b, it.fprev, it.fnext, it.bprev, it.bnext = nil, nil, nil, nil, nil, nil, nil
	return true
}

// Expire removes every item whose band TTL has passed at now, oldest
// first, and calls fn (if not nil) with each after removing it. It
// returns how many it removed.
func (q *Queue) Expire(now time.Time, fn func(*Item)) int {
	n := 0
	for _, b := range q.bands {
		for b.head != nil && !b.head.deadline.After(now) {
			it := b.head
			q.Remove(it)
			n++
			if fn != nil {
				fn(it)
			}
		}
	}
	return n
}

// NextExpiry is the earliest deadline of a queued item; false if none.
func (q *Queue) NextExpiry() (time.Time, bool) {
	var t time.Time
	ok := false
	for _, b := range q.bands {
		if b.head != nil && (!ok || b.head.deadline.Before(t)) {
			t, ok = b.head.deadline, true
		}
	}
	return t, ok
}
