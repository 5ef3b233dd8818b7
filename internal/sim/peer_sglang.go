package sim

import (
	"slices"
	"time"
)

// sglangPicker is SGLang Model Gateway's cache_aware policy (the Rust
// router of sgl-project/sglang, policies/cache_aware.rs and tree.rs), with
// its published defaults:
//
//   - Load is the router's own in-flight count per worker. The system is
//     imbalanced when max−min > balance_abs_threshold (64) and max >
//     balance_rel_threshold (1.5) × min; then the request goes to the least
//     loaded worker (the first one on ties), and its text is still inserted
//     into that worker's tree.
//   - Otherwise the router matches the request text against one radix tree
//     over characters shared by all workers (tenants). If the matched
//     characters over the text's characters exceed cache_threshold (0.3),
//     the request goes to a tenant of the deepest matched node; otherwise to
//     the tenant whose tree holds the fewest characters. The text is then
//     inserted for the chosen worker.
//   - Every eviction_interval_secs (120) each tenant's tree is trimmed, least
//     recently used leaves first, to max_tree_size (2^26) characters.
//
// Approximation: the character tree is a trie of 32-character chunks (chained
// hashes), so a match is counted in whole chunks and can be short by up to 31
// characters of a real character match; the last, partial chunk of a text is
// a chunk of its own. A tenant of the deepest node is drawn at random (the
// source takes whichever its concurrent map yields first). Eviction removes a
// tenant's least recently touched chunks, which are leaves first because a
// path is touched as a whole.
type sglangPicker struct {
	active []int
	load   ownLoad
	nodes  map[uint64]*sgNode // chunk chain hash -> node
	chars  map[int]int        // tenant -> characters in its tree
	seq    int64
	last   time.Time // last eviction pass
	rnd    rng
	text   []byte
	chunks []uint64
}

// Published defaults of the cache_aware policy.
const (
	sgCacheThreshold   = 0.3
	sgBalanceAbs       = 64
	sgBalanceRel       = 1.5
	sgEvictionInterval = 120 * time.Second
	sgMaxTreeSize      = 1 << 26 // characters per tenant
	sgChunk            = 32      // characters per trie edge (the approximation)
)

// sgNode is one chunk of the tree. Most nodes have one or two tenants, so
// they sit in a small slice rather than a map (memory: agent runs insert
// millions of chunks).
type sgNode struct {
	chars   int32 // characters of this chunk
	depth   int32 // chunks from the root
	tenants []sgTenant
}

type sgTenant struct {
	t    int32 // replica
	seen int64 // last access (insertion sequence)
}

func (n *sgNode) find(t int) int {
	for i, x := range n.tenants {
		if int(x.t) == t {
			return i
		}
	}
	return -1
}

func newSGLangPicker(f *fleet, seed uint64) picker {
	p := &sglangPicker{load: ownLoad{}, nodes: map[uint64]*sgNode{}, chars: map[int]int{}, rnd: rng{seed}}
	_ = p.setMembers(f.active)
	return p
}

func (p *sglangPicker) setMembers(active []int) error {
	p.active = slices.Clone(active)
	for _, a := range active {
		if _, ok := p.chars[a]; !ok {
			p.chars[a] = 0
		}
	}
	return nil
}

func (p *sglangPicker) pick(fl *flight) (int, bool) {
	if p.last.IsZero() {
		p.last = fl.now
	}
	if fl.now.Sub(p.last) >= sgEvictionInterval {
		p.evict()
		p.last = fl.now
	}
	p.text = routingText(p.text[:0], fl.req, " ")
	p.chunks = chainChunks(p.chunks[:0], p.text, sgChunk, 0x5c1a, true)
	maxL, minL, minI := 0, 0, -1
	for _, a := range p.active {
		l := p.load[a]
		if minI < 0 || l < minL {
			minI, minL = a, l
		}
		maxL = max(maxL, l)
	}
	var choice int
	if maxL-minL > sgBalanceAbs && float64(maxL) > sgBalanceRel*float64(minL) {
		choice = minI
		fl.spilled = true // the balance rule overrode the cache
	} else {
		matched, deepest := 0, (*sgNode)(nil)
		for _, h := range p.chunks {
			n := p.nodes[h]
			if n == nil || !p.anyActive(n) {
				break
			}
			matched += int(n.chars)
			deepest = n
		}
		if len(p.text) > 0 && float64(matched)/float64(len(p.text)) > sgCacheThreshold {
			var ts []int
			for _, a := range p.active {
				if deepest.find(a) >= 0 {
					ts = append(ts, a)
				}
			}
			choice = p.rnd.pickTie(ts)
		} else {
			var ts []int
			small := 0
			for _, a := range p.active {
				c := p.chars[a]
				if len(ts) == 0 || c < small {
					ts, small = ts[:0], c
				}
				if c == small {
					ts = append(ts, a)
				}
			}
			choice = p.rnd.pickTie(ts)
		}
	}
	p.insert(choice)
	p.load[choice]++
	return choice, true
}

func (p *sglangPicker) anyActive(n *sgNode) bool {
	for _, x := range n.tenants {
		if slices.Contains(p.active, int(x.t)) {
			return true
		}
	}
	return false
}

func (p *sglangPicker) insert(tenant int) {
	p.seq++
	for i, h := range p.chunks {
		n := p.nodes[h]
		if n == nil {
			c := sgChunk
			if i == len(p.chunks)-1 && len(p.text)%sgChunk != 0 {
				c = len(p.text) % sgChunk
			}
			n = &sgNode{chars: int32(c), depth: int32(i)}
			p.nodes[h] = n
		}
		if k := n.find(tenant); k >= 0 {
			n.tenants[k].seen = p.seq
		} else {
			n.tenants = append(n.tenants, sgTenant{t: int32(tenant), seen: p.seq})
			p.chars[tenant] += int(n.chars)
		}
	}
}

// evict trims every tenant to sgMaxTreeSize characters, least recently
// touched chunks first.
func (p *sglangPicker) evict() {
	for t, c := range p.chars {
		if c <= sgMaxTreeSize {
			continue
		}
		type entry struct {
			h     uint64
			seq   int64
			depth int
		}
		var es []entry
		for h, n := range p.nodes {
			if k := n.find(t); k >= 0 {
				es = append(es, entry{h, n.tenants[k].seen, int(n.depth)})
			}
		}
		// Oldest first; within one insertion, deepest first (leaves
		// before their parents); the hash makes the order total.
		slices.SortFunc(es, func(a, b entry) int {
			switch {
			case a.seq != b.seq:
				return cmpInt64(a.seq, b.seq)
			case a.depth != b.depth:
				return b.depth - a.depth
			}
			return cmpInt64(int64(a.h>>1), int64(b.h>>1))
		})
		for _, e := range es {
			if p.chars[t] <= sgMaxTreeSize {
				break
			}
			n := p.nodes[e.h]
			n.tenants = slices.Delete(n.tenants, n.find(t), n.find(t)+1)
			p.chars[t] -= int(n.chars)
			if len(n.tenants) == 0 {
				delete(p.nodes, e.h)
			}
		}
	}
}

func (p *sglangPicker) done(fl *flight) { p.load[fl.replica]-- }

// hint is ignored: the gateway keeps its own load view.
func (p *sglangPicker) hint(active, inflight []int) {}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
