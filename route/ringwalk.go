package route

// ringWalk visits a set of members in ring order from a key, each once,
// one member at a time, so that a caller that stops at the first member it
// accepts walks the ring only that far.
// Meeting every one of 64 members takes about 300 virtual nodes (the
// coupon collector's 64·H(64)); meeting a given one, about 64.
type ringWalk struct {
	vn   []vnode
	set  bitset // members to visit, by member index
	seen bitset // members met
	left int    // members of set not met yet
	j    int    // next virtual node
	step int    // virtual nodes passed
}

// reset starts a walk over members from key's position on e's ring,
// reusing w's bitsets.
func (w *ringWalk) reset(e *pickEnv, members []int32, key uint64) {
	words := (len(e.s.members) + 63) / 64
	w.set = zeroed(w.set, words)
	w.seen = zeroed(w.seen, words)
	w.left = 0
	for _, i := range members {
		if !w.set.has(i) {
			w.set.set(i)
			w.left++
		}
	}
	w.vn = e.s.ring.vn
	w.j, w.step = 0, 0
	if len(w.vn) > 0 {
		w.j = e.s.ring.search(key)
	}
}

// next returns the next member of the set in ring order, or -1 when every
// one has been met.
func (w *ringWalk) next() int32 {
	n := len(w.vn)
	for w.left > 0 && w.step < n {
		o := int32(w.vn[w.j].owner)
		w.step++
		if w.j++; w.j == n {
			w.j = 0
		}
		if w.set.has(o) && !w.seen.has(o) {
			w.seen.set(o)
			w.left--
			return o
		}
	}
	return -1
}

// candidates lists the pick's candidates (member indices) and its home,
// the first candidate in ring order from req.Key. The pick needs the set
// and the home, not the order: a scan of the members gives the set
// without walking the ring until every candidate has been met. An
// explanation lists candidates in ring order, and the members met on the
// way that are not candidates, so Explain walks the ring over every member.
func (p *prefixIndexPolicy) candidates(e *pickEnv, req *Request) (order []int32, home int32) {
	sc := &p.ix.scratch
	order = sc.order[:0]
	for i := range e.s.members {
		if e.ex != nil || e.candidate(int32(i), req.Model) {
			order = append(order, int32(i))
		}
	}
	sc.order = order
	if e.ex != nil {
		// The walk has copied the members into its set, so order is
		// rewritten from its start as candidates are met.
		sc.walk.reset(e, order, req.Key)
		order = order[:0]
		for o := sc.walk.next(); o >= 0 && len(order) < e.n; o = sc.walk.next() {
			if e.candidate(o, req.Model) {
				order = append(order, o)
			} else {
				e.ex.skipNot(e.s.members[o].name, "walk", e.notCandidate(o, req.Model))
			}
		}
		if len(order) == 0 {
			return order, -1
		}
		return order, order[0]
	}
	if len(order) == 0 {
		return order, -1
	}
	if _, home = e.firstCandidate(req.Key, req.Model); home < 0 {
		return order[:0], -1
	}
	return order, home
}
