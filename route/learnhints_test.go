package route

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLearnFromPickEntriesMatchesFullLookup drives two prefix-index routers
// with the same picks, PickMembers, membership changes (members removed
// and re-added, caches shrunk and grown: index capacity trims) and answers,
// with many picks held open at once so that release slots and their lists
// of kept entries change hands through the pool. Router a learns each
// answer through Report, from the entries its pick kept; router b learns
// the same blocks for the same member with no kept entries (every block
// looked up again), as before the kept entries. Every pick must choose
// alike and, after every step, both indexes must hold the same blocks for
// the same members in the same clock order; at the end nothing is in
// flight. A kept entry credited to another block or member, or a list
// shared by two slots, makes the indexes differ.
func TestLearnFromPickEntriesMatchesFullLookup(t *testing.T) {
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 91))
		members := func() []Member {
			ms := fleet(6)
			for i := range ms {
				ms[i].CacheTokens = (8 + rng.IntN(40)) * indexStride * IndexBlockTokens
			}
			return ms
		}
		ms := members()
		cfg := Config{VirtualNodes: 32, DefaultThreshold: 1024}
		a, b := indexRouter(t, cfg, ms), indexRouter(t, cfg, ms)
		var docs [][]uint64
		for i := range 30 {
			docs = append(docs, chain(seed*1000+uint64(i), 4+rng.IntN(120)))
		}
		type open struct{ da, db Decision }
		var held []open
		learned := 0
		for step := range 1500 {
			switch op := rng.IntN(100); {
			case op < 3:
				// Removal, re-adding and a new cache size between a
				// pick and the learning of its answer.
				next := members()
				if rng.IntN(2) == 0 {
					k := rng.IntN(len(next))
					next = slices.Delete(next, k, k+1)
				}
				if err := a.SetMembers(next); err != nil {
					t.Fatal(err)
				}
				if err := b.SetMembers(next); err != nil {
					t.Fatal(err)
				}
			case op < 8:
				name := fmt.Sprintf("vllm-%d", rng.IntN(6))
				req := Request{Key: rng.Uint64(), Blocks: docs[rng.IntN(len(docs))], PromptTokens: 1000}
				da, errA := a.PickMember(name, req, false)
				db, errB := b.PickMember(name, req, false)
				if (errA == nil) != (errB == nil) {
					t.Fatalf("seed %d step %d: PickMember %s: %v against %v", seed, step, name, errA, errB)
				}
				da.Done()
				db.Done()
			case op < 45 && len(held) > 0:
				k := rng.IntN(len(held))
				o := held[k]
				held = slices.Delete(held, k, k+1)
				prompt := docs[rng.IntN(len(docs))] // usually another prompt than the pick's
				answer := extend(prompt, rng.Uint64(), rng.IntN(40))
				o.da.DoneWith(Outcome{FirstByte: true, PromptTokens: -1, CachedTokens: -1, Blocks: answer})
				id := idOf(b, o.db.Backend)
				if _, ok := b.snap.Load().byName[o.db.Backend]; !ok {
					id = o.db.rel.slot.st.id // removed, still in flight
				}
				idxOf(b).learn(id, answer, nil)
				o.db.Done()
				learned++
			default:
				d := docs[rng.IntN(len(docs))]
				blocks := d[:1+rng.IntN(len(d))]
				if rng.IntN(3) == 0 {
					blocks = extend(d, rng.Uint64(), 1+rng.IntN(20))
				}
				req := Request{Key: rng.Uint64(), Blocks: blocks, PromptTokens: 16 * len(blocks)}
				da, errA := a.TryPick(req)
				db, errB := b.TryPick(req)
				if errA != nil || errB != nil || da.Backend != db.Backend || da.MatchedTokens != db.MatchedTokens {
					t.Fatalf("seed %d step %d: picks %s/%d %v and %s/%d %v differ", seed, step, da.Backend, da.MatchedTokens, errA, db.Backend, db.MatchedTokens, errB)
				}
				// The answer of a pick learned at once is its own
				// prompt continued.
				if rng.IntN(4) == 0 {
					answer := extend(blocks, rng.Uint64(), rng.IntN(40))
					da.DoneWith(Outcome{FirstByte: true, PromptTokens: -1, CachedTokens: -1, Blocks: answer})
					idxOf(b).learn(idOf(b, db.Backend), answer, nil)
					db.Done()
					learned++
					break
				}
				held = append(held, open{da, db})
			}
			sameIndex(t, idxOf(a), idxOf(b), fmt.Sprintf("seed %d step %d", seed, step))
		}
		for _, o := range held {
			o.da.Done()
			o.db.Done()
		}
		if a.InFlight() != 0 || b.InFlight() != 0 {
			t.Fatalf("seed %d: in flight %d and %d after every Done", seed, a.InFlight(), b.InFlight())
		}
		if learned < 300 {
			t.Fatalf("seed %d: only %d answers learned: the comparison is too weak", seed, learned)
		}
		checkIndex(t, idxOf(a))
	}
}

// sameIndex fails unless a and b hold the same blocks with the same
// holder and used bits and every member's clock lists the same blocks from
// the same hand.
func sameIndex(t *testing.T, a, b *prefixIndex, at string) {
	t.Helper()
	if a.table.live != b.table.live || a.words != b.words || len(a.mem) != len(b.mem) {
		t.Fatalf("%s: %d entries, %d words, %d ids against %d, %d, %d", at, a.table.live, a.words, len(a.mem), b.table.live, b.words, len(b.mem))
	}
	for e := range b.entries() {
		if !b.live(uint32(e)) {
			continue
		}
		h := b.hash(uint32(e))
		ea, ok := a.find(h)
		if !ok {
			t.Fatalf("%s: block %x held in b, not in a", at, h)
		}
		if !slices.Equal(a.holders(ea), b.holders(uint32(e))) || !slices.Equal(a.used(ea), b.used(uint32(e))) {
			t.Fatalf("%s: block %x: holders %x used %x against %x %x", at, h, a.holders(ea), a.used(ea), b.holders(uint32(e)), b.used(uint32(e)))
		}
	}
	for id := range a.mem {
		ma, mb := &a.mem[id], &b.mem[id]
		if ma.n != mb.n || ma.capacity != mb.capacity {
			t.Fatalf("%s: member %d holds %d of %d against %d of %d", at, id, ma.n, ma.capacity, mb.n, mb.capacity)
		}
		for k := range ma.n {
			if a.hash(ma.ring[(ma.head+k)%len(ma.ring)]) != b.hash(mb.ring[(mb.head+k)%len(mb.ring)]) {
				t.Fatalf("%s: member %d: clock position %d differs", at, id, k)
			}
		}
	}
}

// TestExplainChangesNothing: a prefix-index router that explains every
// request (cold and warm, with the members saturated now and then) before
// picking it must pick as its twin that never explains, with the same
// index, loads and prefill charges: a dry run charges, holds and learns
// nothing.
func TestExplainChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cfg := Config{VirtualNodes: 32, DefaultThreshold: 3, DefaultCacheTokens: 24 * indexStride * IndexBlockTokens}
	a, b := indexRouter(t, cfg, fleet(5)), indexRouter(t, cfg, fleet(5))
	var docs [][]uint64
	for i := range 12 {
		docs = append(docs, chain(uint64(i)+7, 8+rng.IntN(90)))
	}
	var held []Decision
	explained := 0
	for step := range 800 {
		d := docs[rng.IntN(len(docs))]
		req := Request{Key: rng.Uint64(), Blocks: extend(d, rng.Uint64(), rng.IntN(8)), PromptTokens: 16 * len(d)}
		if rng.IntN(5) == 0 {
			req.Blocks = nil // by the ring
		}
		x := a.Explain(req)
		if x.Err == nil {
			explained++
		}
		da, errA := a.TryPick(req)
		db, errB := b.TryPick(req)
		if (errA == nil) != (errB == nil) || da.Backend != db.Backend || da.MatchedTokens != db.MatchedTokens || da.Load != db.Load {
			t.Fatalf("step %d: %s/%d load %d %v against %s/%d load %d %v", step, da.Backend, da.MatchedTokens, da.Load, errA, db.Backend, db.MatchedTokens, db.Load, errB)
		}
		if errA == nil {
			held = append(held, da, db)
		}
		for len(held) > 0 && rng.IntN(3) > 0 {
			k := rng.IntN(len(held)/2) * 2
			held[k].Done()
			held[k+1].Done()
			held = slices.Delete(held, k, k+2)
		}
		sa, sb := a.Status(), b.Status()
		for i := range sa {
			if sa[i].InFlight != sb[i].InFlight || a.snap.Load().members[i].st.prefill.Load() != b.snap.Load().members[i].st.prefill.Load() {
				t.Fatalf("step %d: %s in flight %d against %d, or its prefill differs", step, sa[i].Name, sa[i].InFlight, sb[i].InFlight)
			}
		}
		sameIndex(t, idxOf(a), idxOf(b), fmt.Sprintf("step %d", step))
	}
	if explained < 200 {
		t.Fatalf("only %d explanations found a backend: the comparison is too weak", explained)
	}
	for _, d := range held {
		d.Done()
	}
	if a.InFlight() != 0 || b.InFlight() != 0 {
		t.Fatalf("in flight %d and %d after every Done", a.InFlight(), b.InFlight())
	}
}
