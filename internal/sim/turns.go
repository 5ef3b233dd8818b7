package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"time"
)

// pendingTurn is a session turn whose previous answer came back: it arrives
// at at. seq breaks ties in release order, so runs are deterministic.
type pendingTurn struct {
	at  time.Duration
	seq int
	req *Request
}

// turnHeap is a min-heap of pending turns by (at, seq).
type turnHeap []pendingTurn

func (h turnHeap) Len() int { return len(h) }
func (h turnHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h turnHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *turnHeap) Push(x any)   { *h = append(*h, x.(pendingTurn)) }
func (h *turnHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *turnHeap) push(t pendingTurn) { heap.Push(h, t) }
func (h *turnHeap) pop() pendingTurn   { return heap.Pop(h).(pendingTurn) }

// FollowAnswer makes r the request prev's client sends next: r arrives
// think after prev's answer comes back (or prev fails) in the run that
// simulates it, as a session's later turn does; r.At stays its nominal
// arrival (pooled bound, live load, hit-rate buckets). A replay of
// closed-loop clients, each waiting for its answer before sending again,
// chains every client's requests this way.
func (r *Request) FollowAnswer(prev *Request, think time.Duration) error {
	switch {
	case prev == nil:
		return errors.New("sim: FollowAnswer: previous request is nil")
	case think < 0:
		return fmt.Errorf("sim: FollowAnswer: think time %v is negative", think)
	case r.follows:
		return errors.New("sim: FollowAnswer: request already follows another")
	case prev.next != nil:
		return errors.New("sim: FollowAnswer: previous request already has a next request")
	}
	// A chain that comes back to r would never start: no request of it
	// arrives on its own. r is usually the newest request (r.next nil), so
	// this walk is short.
	for q := r; q != nil; q = q.next {
		if q == prev {
			return errors.New("sim: FollowAnswer: the chain would loop back to this request")
		}
	}
	r.follows, r.Think, prev.next = true, think, r
	return nil
}

// checkFollowers reports a request that follows one outside reqs: it
// would never be sent.
func checkFollowers(reqs []*Request) error {
	in := make(map[*Request]bool, len(reqs))
	for _, r := range reqs {
		in[r] = true
	}
	released := make(map[*Request]bool)
	for _, r := range reqs {
		if r.next != nil {
			if !in[r.next] {
				return fmt.Errorf("sim: request at %v is followed by a request outside the workload", r.At)
			}
			released[r.next] = true
		}
	}
	for i, r := range reqs {
		if r.follows && !released[r] {
			return fmt.Errorf("sim: request %d (at %v) follows a request outside the workload and would never be sent", i, r.At)
		}
	}
	return nil
}
