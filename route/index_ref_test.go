package route

import "math/bits"

// refIndex is the prefix index as it was before its block table and entry
// records (a Go map from block hash to entry, hashes and bitsets in
// separate slabs, one lookup after another). TestIndexMatchesReference
// drives it and prefixIndex with the same operations and compares every
// result and the state after each.
type refIndex struct {
	words  int               // bitset words per set: ceil(ids/64)
	table  map[uint64]uint32 // block hash -> entry
	hashes []uint64          // entry -> block hash (for deletion)
	sets   []uint64          // entry e: holders at [2e·words, (2e+1)·words), used bits after
	free   []uint32          // free entries
	mem    []refMember       // by member id

	matched []int32  // by member id: blocks matched from the start
	walk    []uint32 // entries of the blocks walked
	cur     []uint64 // the walk's candidate set
}

// refMember is one member's clock: a ring of the entries it holds.
type refMember struct {
	ring     []uint32 // grows by doubling up to capacity
	head, n  int
	capacity int // in blocks; 0 for an unused id
}

func newRefIndex() *refIndex {
	return &refIndex{table: make(map[uint64]uint32), words: 1, cur: make([]uint64, 1)}
}

func (ix *refIndex) holders(e uint32) []uint64 {
	o := int(e) * 2 * ix.words
	return ix.sets[o : o+ix.words]
}

func (ix *refIndex) used(e uint32) []uint64 {
	o := (int(e)*2 + 1) * ix.words
	return ix.sets[o : o+ix.words]
}

// setMember sizes member id's index to capacity blocks, growing the id
// space if needed, and trims it if it shrank. Caller holds mu.
func (ix *refIndex) setMember(id int32, capacity int) {
	ix.grow(int(id) + 1)
	m := &ix.mem[id]
	m.capacity = max(1, capacity)
	for m.n > m.capacity {
		ix.evictOne(id)
	}
}

// grow makes room for ids 0..n-1: the member table and, when n passes a
// multiple of 64, wider bitsets (every entry is copied once).
func (ix *refIndex) grow(n int) {
	for len(ix.mem) < n {
		ix.mem = append(ix.mem, refMember{})
		ix.matched = append(ix.matched, 0)
	}
	w := (n + 63) / 64
	if w <= ix.words {
		return
	}
	sets := make([]uint64, len(ix.hashes)*2*w)
	for e := range ix.hashes {
		copy(sets[e*2*w:], ix.holders(uint32(e)))
		copy(sets[(e*2+1)*w:], ix.used(uint32(e)))
	}
	ix.sets, ix.words = sets, w
	ix.cur = make([]uint64, w)
}

// dropMember forgets everything member id holds (the id is being freed).
// Caller holds mu.
func (ix *refIndex) dropMember(id int32) {
	if int(id) >= len(ix.mem) {
		return
	}
	m := &ix.mem[id]
	for m.n > 0 {
		e := m.ring[m.head]
		m.head = (m.head + 1) % len(m.ring)
		m.n--
		ix.unhold(e, id)
	}
	*m = refMember{}
}

func (ix *refIndex) unhold(e uint32, id int32) {
	w, b := id>>6, uint64(1)<<(id&63)
	h, u := ix.holders(e), ix.used(e)
	h[w] &^= b
	u[w] &^= b
	for _, x := range h {
		if x != 0 {
			return
		}
	}
	delete(ix.table, ix.hashes[e])
	ix.free = append(ix.free, e)
}

// evictOne advances member id's clock hand until it evicts one entry.
func (ix *refIndex) evictOne(id int32) {
	m := &ix.mem[id]
	w, b := id>>6, uint64(1)<<(id&63)
	for m.n > 0 {
		e := m.ring[m.head]
		m.head++
		if m.head == len(m.ring) {
			m.head = 0
		}
		u := ix.used(e)
		if u[w]&b != 0 && m.n > 1 {
			// Second chance: clear the bit and requeue at the back.
			u[w] &^= b
			m.ring[(m.head+m.n-1)%len(m.ring)] = e
			continue
		}
		m.n--
		ix.unhold(e, id)
		return
	}
}

// entry returns the entry of hash h, creating it.
func (ix *refIndex) entry(h uint64) uint32 {
	if e, ok := ix.table[h]; ok {
		return e
	}
	var e uint32
	if k := len(ix.free); k > 0 {
		e = ix.free[k-1]
		ix.free = ix.free[:k-1]
		clear(ix.sets[int(e)*2*ix.words : (int(e)+1)*2*ix.words])
		ix.hashes[e] = h
	} else {
		e = uint32(len(ix.hashes))
		ix.hashes = append(ix.hashes, h)
		for range 2 * ix.words {
			ix.sets = append(ix.sets, 0)
		}
	}
	ix.table[h] = e
	return e
}

// hold records that member id holds entry e, marking it used.
func (ix *refIndex) hold(e uint32, id int32) {
	w, b := id>>6, uint64(1)<<(id&63)
	h := ix.holders(e)
	if h[w]&b != 0 {
		ix.used(e)[w] |= b
		return
	}
	m := &ix.mem[id]
	if m.capacity == 0 {
		return
	}
	if m.n == m.capacity {
		ix.evictOne(id)
	}
	if m.n == len(m.ring) {
		// Grow the ring in order (head first) up to capacity.
		ring := make([]uint32, min(m.capacity, max(64, 2*len(m.ring))))
		for i := range m.n {
			ring[i] = m.ring[(m.head+i)%len(m.ring)]
		}
		m.ring, m.head = ring, 0
	}
	m.ring[(m.head+m.n)%len(m.ring)] = e
	m.n++
	h = ix.holders(e) // evictOne may not move sets, but stay safe
	h[w] |= b
}

// match walks the sampled blocks from the start with the candidate set cand
// (a bitset over ids, ix.words long) and leaves in ix.matched[id] how many
// leading blocks each candidate holds (to its last sampled block held), and
// in ix.walk the entries walked. It stops at the first block no candidate
// still in the walk holds, and returns the number of blocks matched by
// anyone. Caller holds mu.
func (ix *refIndex) match(blocks []uint64, cand []uint64) int {
	cur := ix.cur[:ix.words]
	copy(cur, cand)
	ix.walk = ix.walk[:0]
	n := len(blocks)
	reached := 0
	for i := range samples(n) {
		pos := samplePos(i, n)
		e, ok := ix.table[blocks[pos]]
		if !ok {
			break
		}
		h := ix.holders(e)
		left := uint64(0)
		for w := range cur {
			nw := cur[w] & h[w]
			ix.setMatched(w, cur[w]&^nw, reached)
			cur[w] = nw
			left |= nw
		}
		if left == 0 {
			break
		}
		ix.walk = append(ix.walk, e)
		reached = pos + 1
	}
	for w := range cur {
		ix.setMatched(w, cur[w], reached)
	}
	return reached
}

func (ix *refIndex) setMatched(w int, set uint64, k int) {
	for set != 0 {
		t := bits.TrailingZeros64(set)
		set &= set - 1
		ix.matched[w*64+t] = int32(k)
	}
}

// insert records that member id now holds blocks (a prompt it was sent, or
// a prompt and its answer). The sampled blocks it already held (held, in
// samples, from match on the same blocks) are marked used first, so that
// making room cannot evict them; the rest are added from the end backwards,
// so that the clock, like vLLM's free queue, evicts a prompt's tail before
// its head. The first len(ix.walk) samples' entries come from match. A
// member holds at most its capacity: of a longer prompt, the first
// capacity samples.
func (ix *refIndex) insert(id int32, blocks []uint64, held int) {
	if int(id) >= len(ix.mem) {
		return
	}
	n := len(blocks)
	count := min(samples(n), ix.mem[id].capacity)
	held = min(held, count, len(ix.walk))
	for i := range held {
		ix.hold(ix.walk[i], id)
	}
	for i := count - 1; i >= held; i-- {
		if i < len(ix.walk) {
			ix.hold(ix.walk[i], id)
		} else {
			ix.hold(ix.entry(blocks[samplePos(i, n)]), id)
		}
	}
}

// forget evicts k of member id's least recently used blocks: the member
// held less than the index predicted, so its cache is under more pressure
// than the capacity says.
func (ix *refIndex) forget(id int32, k int) {
	if int(id) >= len(ix.mem) {
		return
	}
	for ; k > 0 && ix.mem[id].n > 0; k-- {
		ix.evictOne(id)
	}
}
