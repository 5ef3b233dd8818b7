package flowcontrol

// OnEvict makes a full band fair to the flows that queue little: when a
// request arrives at a band holding its MaxRequests or MaxBytes, the
// newest queued request of the band's longest flow (the most queued
// requests) is taken out and passed to fn, and the arrival takes its
// place — provided that flow is not the arrival's own and holds at least
// two more requests than it. fn must answer the evicted request (a 429,
// ReasonEvicted). Without OnEvict a full band refuses the arrival, so
// one flooding tenant can lock every other tenant of its band out. The
// walk for the longest flow covers the band's backlogged flows and
// happens only when the band is full.
func (q *Queue) OnEvict(fn func(*Item)) { q.evict = fn }

// makeRoom evicts for it from full band b; false when b is full and
// nothing may be evicted. A band above its limits (SetPolicy lowered
// them) evicts nothing: it drains below them first.
func (q *Queue) makeRoom(b *band, it *Item) bool {
	for b.n+1 > b.lim.MaxRequests || b.bytes+it.Bytes > b.lim.MaxBytes {
		if q.evict == nil || b.n > b.lim.MaxRequests || b.bytes > b.lim.MaxBytes {
			return false
		}
		own, ownN := q.flows[it.Flow], 0
		if own != nil && own.b == b && own.hidx >= 0 {
			ownN = own.n
		}
		var long *flowState
		for _, fs := range b.heap {
			if long == nil || fs.n > long.n {
				long = fs
			}
		}
		if long == nil || long == own || long.n <= ownN+1 {
			return false
		}
		victim := long.tail
		q.Remove(victim)
		q.evict(victim)
	}
	return true
}
