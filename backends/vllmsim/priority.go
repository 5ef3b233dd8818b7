package vllmsim

import (
	"container/heap"
	"math"
)

// Scheduling policies of EngineConfig.SchedulingPolicy, spelled as vLLM's
// --scheduling-policy.
const (
	SchedulingFCFS     = "fcfs"
	SchedulingPriority = "priority"
)

// Under the priority policy the waiting requests form a heap ordered by
// (Priority, arrival), lower first, as vLLM's priority request queue orders
// them by (priority, arrival_time). When the request at its head cannot be
// admitted (the batch is full or its KV blocks are not free), the running
// request of the lowest priority (highest value, latest arrival among
// equals) is preempted while its priority is strictly lower than the
// head's: its blocks are released (they stay in the prefix cache) and it
// waits again with its original arrival, to be recomputed when readmitted:
// the prompt's uncached part and the tokens generated so far, after which
// decoding resumes where it stopped. A request never reports a second
// first token. Preemption happens only when preempting every running
// request of lower priority would make room; otherwise the head waits.

// prioQueue is a min-heap of waiting requests by (priority, id); ids grow
// with arrival. Cancelled entries stay until they reach the top.
type prioQueue []*request

func (q prioQueue) Len() int { return len(q) }

func (q prioQueue) Less(i, j int) bool {
	if q[i].req.Priority != q[j].req.Priority {
		return q[i].req.Priority < q[j].req.Priority
	}
	return q[i].id < q[j].id
}

func (q prioQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

func (q *prioQueue) Push(x any) { *q = append(*q, x.(*request)) }

func (q *prioQueue) Pop() any {
	old := *q
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return r
}

// enqueue puts r among the waiting requests.
func (e *Engine) enqueue(r *request) {
	if e.cfg.SchedulingPolicy == SchedulingPriority {
		heap.Push(&e.prio, r)
	} else {
		e.waiting = append(e.waiting, r)
	}
	e.numWaiting++
}

// admitPriority admits waiting requests in priority order, preempting
// running requests of lower priority when the head does not fit.
func (e *Engine) admitPriority() {
	for e.numWaiting > 0 {
		r := e.prio[0]
		if r.phase != phaseWaiting { // cancelled
			heap.Pop(&e.prio)
			continue
		}
		total := blocksFor(len(r.req.Prompt) + r.req.MaxTokens)
		if len(e.running) < e.cfg.MaxNumSeqs && e.fits(r, total) {
			heap.Pop(&e.prio)
			e.numWaiting--
			e.start(r, total)
			continue
		}
		if !e.roomBelow(r, total) {
			return
		}
		e.preempt(e.victim())
	}
}

// victim is the running request vLLM preempts first: the highest priority
// value, the latest arrival among equals.
func (e *Engine) victim() *request {
	var v *request
	for _, r := range e.running {
		if v == nil || r.req.Priority > v.req.Priority || (r.req.Priority == v.req.Priority && r.id > v.id) {
			v = r
		}
	}
	return v
}

// roomBelow reports whether preempting every running request of lower
// priority than r would give r a batch slot and its blocks. Blocks that
// several such requests share are not counted, so the answer errs towards
// waiting.
func (e *Engine) roomBelow(r *request, total int) bool {
	slots, blocks := e.cfg.MaxNumSeqs-len(e.running), 0
	for _, v := range e.running {
		if v.req.Priority <= r.req.Priority {
			continue
		}
		slots++
		blocks += v.private
		for _, b := range v.held {
			if b.ref == 1 {
				blocks++
			}
		}
	}
	if slots <= 0 {
		return false
	}
	need, reuseFree := total-len(r.hashes), 0
	for _, h := range r.hashes {
		if b, ok := e.blocks[h]; !ok {
			need++
		} else if b.ref == 0 {
			reuseFree++
		}
	}
	return need <= e.cfg.CacheBlocks-e.used-reuseFree+blocks
}

// preempt sends running request v back to the waiting queue.
func (e *Engine) preempt(v *request) {
	e.release(v)
	v.phase = phaseWaiting
	e.stats.Preemptions++
	heap.Push(&e.prio, v)
	e.numWaiting++
}

// generated is how many output tokens r has produced.
func (r *request) generated() int {
	if r.first.IsZero() {
		return 0
	}
	return r.req.MaxTokens - int(math.Ceil(r.decode-1e-6))
}
