package sim

import (
	"container/heap"
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
