package route

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestBlockTableMatchesMap drives the index's block table and a Go map with
// the same random adds, removes and lookups, through growth and back, with
// keys a client could aim at one slot (equal low bits, equal high bits,
// small integers) as well as random ones.
func TestBlockTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	ix := newPrefixIndex()
	ix.setMember(0, 1)
	model := map[uint64]uint32{}
	var keys []uint64
	newKey := func() uint64 {
		x := rng.Uint64()
		switch rng.IntN(4) {
		case 0:
			return x << 24 // low 24 bits equal
		case 1:
			return 0xabcdef0000000000 | x>>40 // high 24 bits equal
		case 2:
			return x >> 48 // small integers
		}
		return x
	}
	check := func() {
		t.Helper()
		for h, e := range model {
			if got, ok := ix.find(h); !ok || got != e {
				t.Fatalf("find(%x) = %d, %v; the map has %d", h, got, ok, e)
			}
		}
		used := 0
		for _, s := range ix.table.slots {
			if s != 0 {
				used++
			}
		}
		if used != len(model) || ix.table.live != len(model) {
			t.Fatalf("%d slots used, live %d, map %d", used, ix.table.live, len(model))
		}
	}
	for round := range 6 {
		// Grow to a few thousand keys, then shrink to a few, so removal
		// runs over wrapped and long probe runs.
		target := 3000
		if round%2 == 1 {
			target = 10
		}
		for step := 0; step < 20000; step++ {
			grow := len(model) < target
			switch op := rng.IntN(10); {
			case op < 4 && grow || op < 2:
				h := newKey()
				if _, ok := model[h]; ok {
					continue
				}
				e := ix.entry(h)
				ix.holders(e)[0] = 1 // live: unhold removes it
				model[h] = e
				keys = append(keys, h)
			case op < 7 && len(keys) > 0:
				k := rng.IntN(len(keys))
				h := keys[k]
				keys[k] = keys[len(keys)-1]
				keys = keys[:len(keys)-1]
				ix.unhold(model[h], 0)
				delete(model, h)
			default:
				h := newKey()
				e, ok := ix.find(h)
				if me, mok := model[h]; ok != mok || ok && e != me {
					t.Fatalf("find(%x) = %d, %v; the map has %d, %v", h, e, ok, me, mok)
				}
			}
			if step%2500 == 0 {
				check()
			}
		}
		check()
	}
}

// TestMatchOneWord compares the one-word match loop with the general one
// on an index a random workload filled (evictions and feedback leave holes
// in members' prefixes), for random prompts and candidate sets.
func TestMatchOneWord(t *testing.T) {
	r := indexRouter(t, Config{VirtualNodes: 16, DefaultCacheTokens: 64 * 64, DefaultThreshold: 1024}, fleet(40))
	rng := rand.New(rand.NewPCG(3, 5))
	docs := make([][]uint64, 40)
	for i := range docs {
		docs[i] = extend(chain(uint64(i%5), 1+rng.IntN(30)), uint64(i), 1+rng.IntN(100))
	}
	prompt := func() []uint64 {
		doc := docs[rng.IntN(len(docs))]
		if rng.IntN(3) == 0 {
			return extend(doc[:1+rng.IntN(len(doc))], rng.Uint64(), rng.IntN(20))
		}
		return doc
	}
	ix := idxOf(r)
	for range 3000 {
		req := Request{Key: rng.Uint64(), Blocks: prompt(), PromptTokens: 1000}
		d, err := r.TryPick(req)
		if err != nil {
			t.Fatal(err)
		}
		d.DoneWith(Outcome{FirstByte: true, PromptTokens: 1000, CachedTokens: rng.IntN(1000)})
	}
	checkIndex(t, ix)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.words != 1 {
		t.Fatalf("%d bitset words, want 1", ix.words)
	}
	agreed := 0
	for range 3000 {
		blocks := prompt()
		cand := []uint64{rng.Uint64() & rng.Uint64() & (1<<40 - 1)}
		if rng.IntN(4) == 0 {
			cand[0] = 1<<40 - 1
		}
		ix.walk = ix.walk[:0]
		want := ix.matchN(blocks, cand)
		wantMatched := slices.Clone(ix.matched)
		wantWalk := slices.Clone(ix.walk)
		clear(ix.matched)
		ix.walk = ix.walk[:0]
		got := ix.match1(blocks, cand[0])
		for id := range 40 {
			if cand[0]&(1<<id) != 0 && ix.matched[id] != wantMatched[id] {
				t.Fatalf("member %d matched %d blocks, the general loop %d", id, ix.matched[id], wantMatched[id])
			}
		}
		if got != want || !slices.Equal(ix.walk, wantWalk) {
			t.Fatalf("one word: reached %d, walk %v; general: %d, %v", got, ix.walk, want, wantWalk)
		}
		if want > 0 {
			agreed++
		}
	}
	if agreed < 1000 {
		t.Fatalf("only %d of 3000 prompts matched anything: the comparison is too weak", agreed)
	}
}

// naiveRingOrder walks every virtual node from key's position and lists
// each candidate for model the first time it is met.
func naiveRingOrder(e *pickEnv, model string, key uint64) []int32 {
	var order []int32
	seen := map[int32]bool{}
	vn := e.s.ring.vn
	for j, step := e.s.ring.search(key), 0; step < len(vn); j, step = (j+1)%len(vn), step+1 {
		if o := int32(vn[j].owner); !seen[o] {
			seen[o] = true
			if e.candidate(o, model) {
				order = append(order, o)
			}
		}
	}
	return order
}

// TestRingWalkOrder: the pick's candidate scan gives the candidates and
// home that walking the ring until every candidate is met gives, the
// explanation's list is that walk's order, and ringWalk meets a set in
// that walk's order, for fleets with models and unhealthy members.
func TestRingWalkOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{1, 7, 64, 70} {
		ms := fleet(n)
		for i := range ms {
			if i%4 == 1 {
				ms[i].Models = []string{"m"}
			}
		}
		r := indexRouter(t, Config{VirtualNodes: 40}, ms)
		for i := 0; i < n/5; i++ {
			setHealthy(r, ms[rng.IntN(n)].Name, false)
		}
		p := r.snap.Load().policy.(*prefixIndexPolicy)
		var w ringWalk
		for k := range 300 {
			s := r.snap.Load()
			model := []string{"", "m", "other"}[k%3]
			e := pickEnv{r: r, s: s, n: s.candidates(model)}
			req := Request{Key: rng.Uint64(), Model: model}
			p.ix.mu.Lock()
			full := naiveRingOrder(&e, model, req.Key)
			ex := e
			ex.ex = &Explanation{}
			if explained, _ := p.candidates(&ex, &req); !slices.Equal(explained, full) {
				t.Fatalf("n=%d model %q: explanation's order %v, ring walk %v", n, model, explained, full)
			}
			order, home := p.candidates(&e, &req)
			if len(full) != e.n || len(order) != e.n {
				t.Fatalf("n=%d model %q: %d candidates counted, ring walk %d, scan %d", n, model, e.n, len(full), len(order))
			}
			if !slices.Equal(slices.Sorted(slices.Values(order)), slices.Sorted(slices.Values(full))) {
				t.Fatalf("n=%d: scan %v, ring walk %v", n, order, full)
			}
			if len(full) > 0 && home != full[0] || len(full) == 0 && home != -1 {
				t.Fatalf("n=%d: home %d, ring walk starts at %v", n, home, full)
			}
			key := rng.Uint64()
			want := naiveRingOrder(&e, model, key)
			var got []int32
			w.reset(&e, order, key)
			for i := w.next(); i >= 0; i = w.next() {
				got = append(got, i)
			}
			p.ix.mu.Unlock()
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d: ringWalk %v, ring order %v", n, got, want)
			}
		}
	}
}

// TestIndexMatchesReference drives the index and refIndex (the index
// before its block table, batched lookups and in-place used bits) with the
// same random members, picks (match, then insert for one candidate, as a
// pick charges), learned answers and feedback, over 72 ids (two bitset
// words) and capacities small enough that members evict all the time.
// Answers are learned with the entries their pick held as hints (the
// reference looks every block up), some at once, some after other members
// evicted or reused those entries, and some with another prompt's hints. Every
// match must return the same reach, walk and per-candidate matches, and
// after every operation the members' clocks and every entry's holder and
// used bits must be the same.
func TestIndexMatchesReference(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 77))
		ix, ref := newPrefixIndex(), newRefIndex()
		var roots, docs [][]uint64
		for i := range 8 {
			roots = append(roots, chain(seed*100+uint64(i), 1+rng.IntN(24)))
		}
		for i := range 80 {
			docs = append(docs, extend(roots[rng.IntN(len(roots))], seed*1000+uint64(i), 1+rng.IntN(220)))
		}
		prompt := func() []uint64 {
			d := docs[rng.IntN(len(docs))]
			switch rng.IntN(4) {
			case 0:
				return d[:1+rng.IntN(len(d))]
			case 1:
				return extend(d, rng.Uint64(), 1+rng.IntN(40))
			}
			return d
		}
		ids := 8 + int(seed%2)*64 // one word, then two
		active := map[int32]bool{}
		matches := 0
		// picked are picks whose answer is not learned yet, with the
		// entries their insert held (a Decision's hints).
		type pick struct {
			id     int32
			blocks []uint64
			hints  []uint32
		}
		var picked []pick
		for step := range 2500 {
			switch op := rng.IntN(100); {
			case op < 4 || len(active) == 0:
				id, c := int32(rng.IntN(ids)), 1+rng.IntN(80)
				ix.setMember(id, c)
				ref.setMember(id, c)
				active[id] = true
			case op < 6:
				id := int32(rng.IntN(ids))
				ix.dropMember(id)
				ref.dropMember(id)
				delete(active, id)
			case op < 12:
				id, k := int32(rng.IntN(ids)), 1+rng.IntN(6)
				ix.forget(id, k)
				ref.forget(id, k)
			case op < 18:
				id, blocks := int32(rng.IntN(ids)), prompt()
				ix.walk, ref.walk = ix.walk[:0], ref.walk[:0]
				ix.insert(id, blocks, 0)
				ref.insert(id, blocks, 0)
			case op < 25:
				if len(picked) == 0 {
					continue
				}
				k := rng.IntN(len(picked))
				p := picked[k]
				picked = slices.Delete(picked, k, k+1)
				answer := extend(p.blocks, rng.Uint64(), rng.IntN(30))
				if rng.IntN(5) == 0 {
					answer = prompt() // hints of another prompt
				}
				ix.learn(p.id, answer, p.hints)
				ref.walk = ref.walk[:0]
				ref.insert(p.id, answer, 0)
			default:
				blocks := prompt()
				cand := make([]uint64, ix.words)
				var in []int32
				for id := range active {
					if rng.IntN(3) > 0 {
						cand[id>>6] |= 1 << (id & 63)
						in = append(in, id)
					}
				}
				if len(in) == 0 {
					continue
				}
				slices.Sort(in)
				got, want := ix.match(blocks, cand), ref.match(blocks, cand)
				if got != want || len(ix.walk) != len(ref.walk) {
					t.Fatalf("seed %d step %d: match reached %d walking %d entries, reference %d walking %d", seed, step, got, len(ix.walk), want, len(ref.walk))
				}
				for k, e := range ix.walk {
					if ix.hash(e) != ref.hashes[ref.walk[k]] {
						t.Fatalf("seed %d step %d: walk entry %d differs", seed, step, k)
					}
				}
				for _, id := range in {
					if ix.matched[id] != ref.matched[id] {
						t.Fatalf("seed %d step %d: member %d matched %d, reference %d", seed, step, id, ix.matched[id], ref.matched[id])
					}
				}
				if want > 0 {
					matches++
				}
				id := in[rng.IntN(len(in))]
				held := heldSamples(int(ix.matched[id]), len(blocks))
				ix.insert(id, blocks, held)
				ref.insert(id, blocks, held)
				picked = append(picked, pick{id, blocks, slices.Clone(ix.sampled)})
			}
			compareWithReference(t, ix, ref)
		}
		if matches < 300 {
			t.Fatalf("seed %d: only %d matches found anything: the comparison is too weak", seed, matches)
		}
		checkTable(t, ix)
	}
}

// compareWithReference fails unless ix and ref hold the same entries with
// the same holder and used bits and every member's clock lists the same
// blocks from the same hand.
func compareWithReference(t *testing.T, ix *prefixIndex, ref *refIndex) {
	t.Helper()
	if ix.table.live != len(ref.table) || ix.words != ref.words {
		t.Fatalf("%d entries in %d words, reference %d in %d", ix.table.live, ix.words, len(ref.table), ref.words)
	}
	for h, re := range ref.table {
		e, ok := ix.find(h)
		if !ok {
			t.Fatalf("block %x: in the reference, not in the index", h)
		}
		if !slices.Equal(ix.holders(e), ref.holders(re)) || !slices.Equal(ix.used(e), ref.used(re)) {
			t.Fatalf("block %x: holders %x used %x, reference %x %x", h, ix.holders(e), ix.used(e), ref.holders(re), ref.used(re))
		}
	}
	if len(ix.mem) != len(ref.mem) {
		t.Fatalf("%d members, reference %d", len(ix.mem), len(ref.mem))
	}
	for id := range ix.mem {
		m, rm := &ix.mem[id], &ref.mem[id]
		if m.n != rm.n || m.capacity != rm.capacity {
			t.Fatalf("member %d: %d of %d, reference %d of %d", id, m.n, m.capacity, rm.n, rm.capacity)
		}
		for k := range m.n {
			if ix.hash(m.ring[(m.head+k)%len(m.ring)]) != ref.hashes[rm.ring[(rm.head+k)%len(rm.ring)]] {
				t.Fatalf("member %d: clock position %d differs from the reference", id, k)
			}
		}
	}
}

// TestIndexStatsBytesMatchHeap keeps IndexStats.Bytes honest: filling the
// index with 32,768 entries (BenchmarkPrefixIndex's 256 prompts of 512
// blocks on 64 members) must grow the Go heap by what it reports, within
// 10%. (The map-based index reported 1.73 MB here while the heap grew by
// 2.15 MB.)
func TestIndexStatsBytesMatchHeap(t *testing.T) {
	const docs, blocks = 256, 512
	r := indexRouter(t, Config{DefaultThreshold: MaxThreshold}, fleet(64))
	reqs := make([]Request, docs)
	for i := range reqs {
		bl := chain(uint64(i)+1, blocks)
		reqs[i] = Request{Key: splitmix(uint64(i)), Blocks: bl, PromptTokens: blocks * IndexBlockTokens}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range reqs {
		d, err := r.TryPick(reqs[i])
		if err != nil {
			t.Fatal(err)
		}
		d.DoneWith(Outcome{FirstByte: true, PromptTokens: -1, CachedTokens: -1})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	st, _ := r.IndexStats()
	if e := st.MemberEntries["vllm-0"]; e == 0 {
		t.Fatalf("member vllm-0 holds no entries: %+v", st.MemberEntries)
	}
	if math.Abs(float64(st.Bytes-grew)) > 0.1*float64(grew) {
		t.Errorf("IndexStats.Bytes = %d, the heap grew by %d", st.Bytes, grew)
	}
	runtime.KeepAlive(reqs)
}
