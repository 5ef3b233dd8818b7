package route

import (
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// IndexBlockTokens is the number of prompt tokens one index block stands
// for: a block is 64 characters of routing text (normalize.BlockSize), about
// 16 tokens, the size of a vLLM KV block. Member.CacheTokens is divided by
// it to give the member's index capacity in blocks.
const IndexBlockTokens = 16

// prefixIndex remembers, per member, the prompt blocks the router sent
// there, as far as the member's KV cache can hold them.
//
// Each held block has an entry: its hash and two bitsets over member ids,
// who holds the block and who used it since the clock hand last passed
// (the CLOCK approximation of LRU), side by side in one record so that a
// lookup usually reads all three in one cache line. A hash table (blockTable
// below) finds the entry of a block hash. A pick walks the request's
// blocks once, intersecting holder sets, and stops when no candidate is
// left, so its cost is one lookup per matched block whatever the fleet
// size.
//
// Each member has a ring of the entries it holds, in insertion order, at
// most its capacity long. Adding a block to a full member advances its clock
// hand: entries used since the last pass get a second chance (moved to the
// back, bit cleared), the first unused one is evicted. Every entry moves at
// most once per use, so eviction is amortized O(1).
//
// All of it is guarded by mu: picks with the prefix-index policy serialize
// on it (see BenchmarkPrefixIndex).
type prefixIndex struct {
	mu     sync.Mutex
	words  int         // bitset words per set: ceil(ids/64)
	stride int         // words per entry record: 1 + 2·words
	recs   []uint64    // entry e at [e·stride, (e+1)·stride): hash, holders, used
	table  blockTable  // block hash -> entry
	free   []uint32    // free entries
	mem    []idxMember // by member id

	// Pick scratch, valid while mu is held.
	matched []int32  // by member id: blocks matched from the start
	walk    []uint32 // entries of the blocks walked
	// sampled is each sample's entry as the last insert without hints held
	// it; hints, set by learn for its insert, are those of the pick being
	// learned.
	sampled, hints []uint32
	cur            []uint64 // the walk's candidate set
	scratch        pickScratch

	touched uint64 // touchClock's sum of what it read, otherwise unused

	mispredictions atomic.Uint64
	corrections    atomic.Uint64 // blocks evicted by feedback
}

// idxMember is one member's clock: a ring of the entries it holds.
type idxMember struct {
	ring     []uint32 // grows by doubling up to capacity
	head, n  int
	capacity int // in blocks; 0 for an unused id
}

func newPrefixIndex() *prefixIndex {
	return &prefixIndex{words: 1, stride: 3, cur: make([]uint64, 1), table: newBlockTable()}
}

// entries is the number of entry records, live or free.
func (ix *prefixIndex) entries() int { return len(ix.recs) / ix.stride }

func (ix *prefixIndex) hash(e uint32) uint64 { return ix.recs[int(e)*ix.stride] }

func (ix *prefixIndex) holders(e uint32) []uint64 {
	o := int(e)*ix.stride + 1
	return ix.recs[o : o+ix.words]
}

func (ix *prefixIndex) used(e uint32) []uint64 {
	o := int(e)*ix.stride + 1 + ix.words
	return ix.recs[o : o+ix.words]
}

// find returns the entry of block hash h.
func (ix *prefixIndex) find(h uint64) (uint32, bool) {
	x := ix.table.mix(h)
	return ix.resolve(h, x, ix.table.slots[x>>ix.table.shift])
}

// resolve finds the entry of h, whose mixed value is x, given the content
// s of its home slot.
func (ix *prefixIndex) resolve(h, x, s uint64) (uint32, bool) {
	t := &ix.table
	tag := x >> 32
	for i := x >> t.shift; s != 0; s = t.slots[i] {
		// The tag's top bits are the slot's home, the rest a fingerprint:
		// most slots of other blocks are passed without reading their
		// entry.
		if s>>32 == tag && ix.recs[int(uint32(s)-1)*ix.stride] == h {
			return uint32(s) - 1, true
		}
		i = (i + 1) & t.mask
	}
	return 0, false
}

// setMember sizes member id's index to capacity blocks, growing the id
// space if needed, and trims it if it shrank. Caller holds mu.
func (ix *prefixIndex) setMember(id int32, capacity int) {
	ix.grow(int(id) + 1)
	m := &ix.mem[id]
	m.capacity = max(1, capacity)
	for m.n > m.capacity {
		ix.evictOne(id)
	}
}

// grow makes room for ids 0..n-1: the member table and, when n passes a
// multiple of 64, wider bitsets (every entry is copied once).
func (ix *prefixIndex) grow(n int) {
	for len(ix.mem) < n {
		ix.mem = append(ix.mem, idxMember{})
		ix.matched = append(ix.matched, 0)
	}
	w := (n + 63) / 64
	if w <= ix.words {
		return
	}
	stride := 1 + 2*w
	recs := make([]uint64, ix.entries()*stride)
	for e := range ix.entries() {
		o := e * stride
		recs[o] = ix.hash(uint32(e))
		copy(recs[o+1:], ix.holders(uint32(e)))
		copy(recs[o+1+w:], ix.used(uint32(e)))
	}
	ix.recs, ix.words, ix.stride = recs, w, stride
	ix.cur = make([]uint64, w)
}

// dropMember forgets everything member id holds (the id is being freed).
// Caller holds mu.
func (ix *prefixIndex) dropMember(id int32) {
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
	*m = idxMember{}
}

func (ix *prefixIndex) unhold(e uint32, id int32) {
	w, b := id>>6, uint64(1)<<(id&63)
	h, u := ix.holders(e), ix.used(e)
	h[w] &^= b
	u[w] &^= b
	if ix.live(e) {
		return
	}
	ix.table.remove(ix.hash(e), e)
	ix.free = append(ix.free, e)
}

// evictOne advances member id's clock hand until it evicts one entry.
func (ix *prefixIndex) evictOne(id int32) {
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
func (ix *prefixIndex) entry(h uint64) uint32 {
	if e, ok := ix.find(h); ok {
		return e
	}
	var e uint32
	if k := len(ix.free); k > 0 {
		e = ix.free[k-1]
		ix.free = ix.free[:k-1]
		o := int(e) * ix.stride
		clear(ix.recs[o : o+ix.stride])
		ix.recs[o] = h
	} else {
		e = uint32(ix.entries())
		ix.recs = append(append(ix.recs, h), make([]uint64, 2*ix.words)...)
	}
	ix.table.add(h, e)
	return e
}

// hold records that member id holds entry e, marking it used.
func (ix *prefixIndex) hold(e uint32, id int32) {
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
	h = ix.holders(e) // evictOne does not move records, but stay safe
	h[w] |= b
}

// indexStride is how many request blocks one index entry stands for: the
// index keeps every fourth block of a prompt (positions 3, 7, 11, ...) and
// its last one. A chained hash stands for the whole prefix before it, so a
// sampled block held means every block before it is too; matching loses at
// most three blocks (about 48 tokens) at the end of a match, and picks and
// memory are four times cheaper.
const indexStride = 4

// samples is how many index entries a prompt of n blocks has.
func samples(n int) int { return (n + indexStride - 1) / indexStride }

// samplePos is the block position of sample i of a prompt of n blocks.
func samplePos(i, n int) int { return min((i+1)*indexStride-1, n-1) }

// match walks the sampled blocks from the start with the candidate set cand
// (a bitset over ids, ix.words long) and leaves in ix.matched[id] how many
// leading blocks each candidate holds (to its last sampled block held), and
// in ix.walk the entries walked. It stops at the first block no candidate
// still in the walk holds, and returns the number of blocks matched by
// anyone. Caller holds mu.
func (ix *prefixIndex) match(blocks []uint64, cand []uint64) int {
	ix.walk = ix.walk[:0]
	if ix.words == 1 {
		return ix.match1(blocks, cand[0])
	}
	return ix.matchN(blocks, cand)
}

// matchN is match for any number of bitset words.
func (ix *prefixIndex) matchN(blocks []uint64, cand []uint64) int {
	cur := ix.cur[:ix.words]
	copy(cur, cand)
	n := len(blocks)
	reached := 0
	for i := range samples(n) {
		pos := samplePos(i, n)
		e, ok := ix.find(blocks[pos])
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

// matchBatch is how many sampled blocks match1 looks up before it uses any
// of the results. The lookups do not depend on one another, so the cache
// misses of a batch (a table slot, then an entry record, per block)
// overlap instead of following one another. A batch past the end of the
// match costs a few lookups whose results are dropped.
const matchBatch = 16

// match1 is match for up to 64 member ids (one bitset word, the common
// fleet), with the candidate set in a register and the holder word read
// straight from the entry record.
func (ix *prefixIndex) match1(blocks []uint64, cur uint64) int {
	n := len(blocks)
	t := &ix.table
	var xs, ss, hs [matchBatch]uint64
	var es [matchBatch]uint32
	reached := 0
	end := n + indexStride - 1 // sample positions are min(p, n-1) for p < end
	for p := indexStride - 1; p < end; {
		// Home slots of the batch's blocks.
		k := 0
		for q := p; k < matchBatch && q < end; q += indexStride {
			x := t.mix(blocks[min(q, n-1)])
			xs[k], ss[k] = x, t.slots[x>>t.shift]
			k++
		}
		// Their entries and holder words, up to the first block not held.
		stop := false
		for j := range k {
			e, ok := ix.resolve(blocks[min(p+j*indexStride, n-1)], xs[j], ss[j])
			if !ok {
				k, stop = j, true
				break
			}
			es[j], hs[j] = e, ix.recs[int(e)*3+1]
		}
		for j := range k {
			nw := cur & hs[j]
			if cur != nw {
				ix.setMatched(0, cur&^nw, reached)
				cur = nw
				if cur == 0 {
					return reached
				}
			}
			ix.walk = append(ix.walk, es[j])
			reached = min(p+j*indexStride, n-1) + 1
		}
		if stop {
			break
		}
		p += k * indexStride
	}
	ix.setMatched(0, cur, reached)
	return reached
}

func (ix *prefixIndex) setMatched(w int, set uint64, k int) {
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
func (ix *prefixIndex) insert(id int32, blocks []uint64, held int) {
	if int(id) >= len(ix.mem) {
		return
	}
	n := len(blocks)
	count := min(samples(n), ix.mem[id].capacity)
	held = min(held, count, len(ix.walk))
	// The member holds the walk's first held entries (match passed them
	// with the member still in the walk), so holding them again only sets
	// their used bits: done here in place, one record at a time.
	hw, uw, b := 1+int(id>>6), 1+ix.words+int(id>>6), uint64(1)<<(id&63)
	for _, e := range ix.walk[:held] {
		o := int(e) * ix.stride
		if ix.recs[o+hw]&b == 0 {
			ix.hold(e, id)
			continue
		}
		ix.recs[o+uw] |= b
	}
	if ix.hints == nil { // a learn from hints keeps no entries for a later one
		ix.sampled = append(ix.sampled[:0], ix.walk[:min(count, len(ix.walk))]...)
		ix.sampled = append(ix.sampled, make([]uint32, count-len(ix.sampled))...)
	}
	lo := max(held, len(ix.walk))
	for i := count - 1; i >= lo; i -= matchBatch {
		ix.holdBatch(id, blocks, i, lo)
	}
	for i := min(count, len(ix.walk)) - 1; i >= held; i-- {
		ix.hold(ix.walk[i], id)
	}
}

// holdBatch holds samples top, top-1, ... down to lo (at most matchBatch of
// them, not below lo) of blocks for member id, as hold(entry(...)) one by one
// would, with their lookups done first so that the cache misses overlap. A
// hold may evict an entry looked up for a later sample of the batch and the
// entry may be reused for another block; such an entry is looked up again.
// A sample with a hint (the entry the pick held for it) is not looked up:
// the hint passes the same check, and a block the pick did not have (the
// prompt's last, the answer's) or an entry evicted since is looked up then.
func (ix *prefixIndex) holdBatch(id int32, blocks []uint64, top, lo int) {
	n := len(blocks)
	t := &ix.table
	k := min(matchBatch, top-lo+1)
	var xs, ss [matchBatch]uint64
	var es [matchBatch]uint32
	var found [matchBatch]bool
	for j := range k {
		if top-j < len(ix.hints) {
			es[j], found[j] = ix.hints[top-j], true
			continue
		}
		x := t.mix(blocks[samplePos(top-j, n)])
		xs[j], ss[j] = x, t.slots[x>>t.shift]
	}
	for j := range k {
		if top-j >= len(ix.hints) {
			es[j], found[j] = ix.resolve(blocks[samplePos(top-j, n)], xs[j], ss[j])
		}
	}
	ix.touchClock(id, k)
	for j := range k {
		h := blocks[samplePos(top-j, n)]
		e := es[j]
		if !found[j] || ix.hash(e) != h || !ix.live(e) {
			e = ix.entry(h)
		}
		ix.hold(e, id)
		if ix.hints == nil {
			ix.sampled[top-j] = e
		}
	}
}

// touchClock reads the records and table slots of the next k entries at
// member id's clock hand, if the member is full: the holds about to be
// made evict or pass them. The reads do not depend on one another, so
// their cache misses overlap here, where one eviction after another would
// wait for each. It changes nothing but the cache.
func (ix *prefixIndex) touchClock(id int32, k int) {
	m := &ix.mem[id]
	if m.n < m.capacity {
		return
	}
	t := &ix.table
	var sum uint64
	for i, h := 0, m.head; i < min(k, m.n); i++ {
		o := int(m.ring[h]) * ix.stride
		x := t.mix(ix.recs[o])
		sum += t.slots[x>>t.shift] + ix.recs[o+ix.stride-1]
		if h++; h == len(m.ring) {
			h = 0
		}
	}
	ix.touched = sum // kept so that the compiler keeps the reads
}

// live reports whether entry e has a holder (is in the table): whether
// some word of its holder bitset (never empty) is non-zero.
func (ix *prefixIndex) live(e uint32) bool { return slices.Max(ix.holders(e)) != 0 }

// heldSamples is how many leading samples of an n-block prompt a member
// matching matched blocks holds.
func heldSamples(matched, n int) int {
	if matched >= n {
		return samples(n)
	}
	return (matched + 1) / indexStride
}

// forget evicts k of member id's least recently used blocks: the member
// held less than the index predicted, so its cache is under more pressure
// than the capacity says.
func (ix *prefixIndex) forget(id int32, k int) {
	if int(id) >= len(ix.mem) {
		return
	}
	for ; k > 0 && ix.mem[id].n > 0; k-- {
		ix.evictOne(id)
		ix.corrections.Add(indexStride)
	}
}

// memory reports the bytes the index holds for member id (its ring and its
// share of the entries it holds: each entry's record and its part of the
// hash table, counted in full for every holder) and in all (the hash
// table, the entry records, the free list and every ring, by capacity).
func (ix *prefixIndex) memory(id int32) (member, total int64) {
	entryBytes := int64(ix.stride) * 8
	if ix.table.live > 0 {
		entryBytes += ix.table.bytes() / int64(ix.table.live)
	}
	total = ix.table.bytes() + int64(cap(ix.recs))*8 + int64(cap(ix.free))*4
	for i := range ix.mem {
		total += int64(cap(ix.mem[i].ring)) * 4
	}
	if int(id) < len(ix.mem) && id >= 0 {
		m := &ix.mem[id]
		member = int64(cap(m.ring))*4 + int64(m.n)*entryBytes
	}
	return member, total
}

// held is the number of index entries (sampled blocks) member id holds.
func (ix *prefixIndex) held(id int32) int {
	if int(id) >= len(ix.mem) {
		return 0
	}
	return ix.mem[id].n
}
