package route

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
)

func init() {
	register("prefix-index", policyEntry{
		build: func(c Config) policy {
			return &prefixIndexPolicy{
				ix:     newPrefixIndex(),
				ring:   prefixAware{chain: !c.DisableSpillChain},
				decode: int64(max(0, c.DecodeWeight)),
			}
		},
		slack: DefaultIndexSlack,
	})
}

// Tuning constants of the cost model and the cold rules; the figures
// behind each value are in docs/routing.md, "Tuning constants".

// missWeight multiplies a candidate's uncached prompt tokens in its cost: a
// miss costs its prefill now and, once cached, the room it takes.
const missWeight = 8

// marginRequests is how many requests' DecodeWeight a warm candidate may
// cost above the cheapest and still win by ring order, so routers whose
// load views differ a little agree.
const marginRequests = 4

// A prompt is warm when some candidate holds warmBlocks blocks more of it
// than every candidate does and, if several hold that match, warmTokens
// tokens more; else the ring places it. The token floor keeps a short
// shared prefix, whose holders each router knows only in part, from
// deciding placement.
const (
	warmBlocks = 1
	warmTokens = 160
)

// coldMarginTokens is how much more queued work (uncharged prefill plus
// DecodeWeight per held request) a cold prompt's ring home may have than
// the least loaded candidate and still take it: the ring counts requests,
// not their size.
const coldMarginTokens = 1024

// coldMarginShare: the cold margin is at least 1/coldMarginShare of the
// least loaded candidate's queued work, so that under saturation noise
// does not move documents off their homes.
const coldMarginShare = 4

// indexCapacityPercent sizes a member's index against its KV cache: a
// little over, so a conversation's next turn returns to its member rather
// than start a copy (feedback forgets what turns out to be gone).
const indexCapacityPercent = 125

// prefixIndexPolicy routes by predicted work. It remembers, per member, the
// prompt blocks it sent there (prefixIndex, bounded by each member's KV
// cache size) and for each candidate predicts the work of sending the
// request there, in prompt tokens: the prefill the member does not hold
// (PromptTokens minus its matched prefix, counted missWeight times) plus
// the work already queued there (prefill charged to earlier picks and not
// yet started, and DecodeWeight per request it holds). The cheapest
// candidate below its bound wins; ties go to the first in ring order from
// the key's home.
//
// A cold prefix, one that no candidate holds warmTokens further than more
// than half of them do, is placed by the ring as prefix-aware places it
// (home, spill chain, walk, all under the bound), so independent routers
// send a new prefix to the same member and their indexes agree, unless the
// home is over the work or cache bound of placeCold. When candidates hold
// the start of the prompt (a shared system prompt), the ring key is the
// first block past it instead of Key, which would send every request
// behind the shared prompt to one home.
type prefixIndexPolicy struct {
	ix     *prefixIndex
	ring   prefixAware
	decode int64
}

func (p *prefixIndexPolicy) readsBlocks() {}

func (p *prefixIndexPolicy) learnPlaced(id int32, blocks []uint64) { p.ix.learn(id, blocks, nil) }

func (p *prefixIndexPolicy) mispredictions() uint64 { return p.ix.mispredictions.Load() }

func (p *prefixIndexPolicy) setMember(id int32, cacheTokens int) {
	p.ix.mu.Lock()
	p.ix.setMember(id, cacheTokens*indexCapacityPercent/100/(IndexBlockTokens*indexStride))
	p.ix.mu.Unlock()
}

func (p *prefixIndexPolicy) dropMember(id int32) {
	p.ix.mu.Lock()
	p.ix.dropMember(id)
	p.ix.mu.Unlock()
}

// scratch of one pick, kept in the index (guarded by its mutex).
type pickScratch struct {
	cand    []uint64 // candidate ids
	order   []int32  // candidate member indices (in ring order from home for Explain)
	walk    ringWalk // candidates in ring order from the first block past the best match
	matches []int32  // candidates' matched blocks, sorted (majorityMatch)
}

func (p *prefixIndexPolicy) pick(e *pickEnv, req *Request) result {
	if len(req.Blocks) == 0 || req.PromptTokens <= 0 {
		return p.ring.pick(e, req)
	}
	p.ix.mu.Lock()
	defer p.ix.mu.Unlock()
	order, home := p.candidates(e, req)
	if len(order) == 0 {
		return result{status: noCandidates, home: -1}
	}
	common, best, second := p.matches(e, req, order)
	nb := len(req.Blocks)
	tokens := func(blocks int) int64 { return int64(blocks) * int64(req.PromptTokens) / int64(nb) }
	if best-common < warmBlocks || tokens(best-second) < warmTokens && tokens(best-common) < warmTokens {
		return p.pickCold(e, req, order, cmp.Or(second, best), tokens)
	}
	return p.pickWarm(e, req, order, home, best, tokens)
}

// matches fills ix.matched for the candidates in order and returns common,
// the match every candidate or more than half of them hold; best, the
// longest match; and second, the longest match two or more candidates hold
// (best itself when several hold it): the part of the prompt that is
// shared.
func (p *prefixIndexPolicy) matches(e *pickEnv, req *Request, order []int32) (common, best, second int) {
	ix := p.ix
	sc := &ix.scratch
	sc.cand = zeroed(sc.cand, ix.words)
	for _, i := range order {
		id := e.s.members[i].st.id
		sc.cand[id>>6] |= 1 << (id & 63)
	}
	common = ix.match(req.Blocks, sc.cand)
	for _, i := range order {
		m := int(ix.matched[e.s.members[i].st.id])
		common = min(common, m)
		switch {
		case m > best:
			best, second = m, best
		case m == best:
			second = best
		case m > second:
			second = m
		}
	}
	// A prefix more than half the candidates hold is shared (a system
	// prompt every request starts with), even if this router has not yet
	// seen some members hold it: following it would keep this router's
	// new prompts on the members it happened to send it to first, and with
	// several routers, each with its own index, they would disagree.
	return max(common, ix.majorityMatch(order, e)), best, second
}

// pickCold places a cold prompt, base blocks of which are held where it
// would go. Cold includes a short match only one candidate holds: that is
// a conversation's own short history as this router saw it, or a shared
// prompt this router happens to have sent to one member. Other routers
// that did not see it place the prompt by the block past the shared part,
// so this router does the same and they all agree.
func (p *prefixIndexPolicy) pickCold(e *pickEnv, req *Request, order []int32, base int, tokens func(int) int64) result {
	nb := len(req.Blocks)
	key := req.Key
	if k := heldSamples(base, nb); base > 0 && k < samples(nb) {
		// The start is held everywhere, or is too short to matter (a
		// shared system prompt): place by the first sampled block past
		// it, where prompts behind that shared start differ and which
		// every router computes alike.
		key = req.Blocks[samplePos(k, nb)]
	}
	res, why := p.placeCold(e, req, order, key, nb)
	p.explainCosts(e, req, order, res, why)
	if res.status != picked {
		return res
	}
	return p.charge(e, req, res, tokens)
}

// pickWarm places a warm prompt, best blocks of which some candidate
// holds: on the cheapest candidate below its bound, or, among those whose
// cost is within marginRequests requests' decode weight of it, the first
// in ring order from the first sampled block past the best match: that
// block is the same for every router, so routers that know the same
// prefix holders send the request to the same one (turn 2 of a chat
// through another router than turn 1 follows turn 1). A failed take means
// a concurrent pick charged that member first; look again with fresh
// loads.
func (p *prefixIndexPolicy) pickWarm(e *pickEnv, req *Request, order []int32, home int32, best int, tokens func(int) int64) result {
	ix := p.ix
	nb := len(req.Blocks)
	keyW := req.Key
	if k := heldSamples(best, nb); k < samples(nb) {
		keyW = req.Blocks[samplePos(k, nb)]
	}
	margin := p.decode * marginRequests
	for attempt := 0; attempt <= len(order)+4; attempt++ {
		minCost := p.minCost(e, req, order, tokens)
		if minCost < 0 {
			p.explainCosts(e, req, order, result{status: saturated}, "")
			return result{status: saturated, home: home}
		}
		bi := int32(-1)
		var bestCost int64
		ix.scratch.walk.reset(e, order, keyW)
		for i := ix.scratch.walk.next(); i >= 0; i = ix.scratch.walk.next() {
			m := &e.s.members[i]
			if m.st.load()+1 > e.limit(i, true) {
				continue
			}
			if c := p.cost(m.st, req.PromptTokens, tokens(int(ix.matched[m.st.id]))); c <= minCost+margin {
				bi, bestCost = i, c
				break
			}
		}
		if bi < 0 {
			continue // loads moved between the two passes
		}
		lim := e.limit(bi, true)
		l, ok := e.take(bi, lim, "prefix-index")
		if !ok {
			continue
		}
		res := result{idx: bi, home: home, reason: ReasonPrefixMatch, load: l, bound: lim, cost: bestCost}
		if bi == home {
			res.reason = ReasonAffinity
		}
		p.explainCosts(e, req, order, res, "")
		return p.charge(e, req, res, tokens)
	}
	return result{status: saturated, home: home}
}

// minCost is the least cost of the candidates in order below their bound,
// or -1 if none is.
func (p *prefixIndexPolicy) minCost(e *pickEnv, req *Request, order []int32, tokens func(int) int64) int64 {
	var least int64 = -1
	for _, i := range order {
		m := &e.s.members[i]
		if m.st.load()+1 > e.limit(i, true) {
			continue
		}
		c := p.cost(m.st, req.PromptTokens, tokens(int(p.ix.matched[m.st.id])))
		if least < 0 || c < least {
			least = c
		}
	}
	return least
}

// majorityMatch is the longest match more than half of the candidates in
// order hold (from ix.matched, filled by match).
func (ix *prefixIndex) majorityMatch(order []int32, e *pickEnv) int {
	ms := ix.scratch.matches[:0]
	for _, i := range order {
		ms = append(ms, ix.matched[e.s.members[i].st.id])
	}
	slices.Sort(ms)
	ix.scratch.matches = ms
	return int(ms[len(ms)-(len(ms)/2+1)])
}

// cacheLoadFactor bounds what the cold path puts in one member's cache: a
// cold prefix skips a ring candidate whose index would hold more than
// cacheLoadFactor × the candidates' mean entries, since the ring's arcs
// alone give members uneven shares of the prefixes.
const cacheLoadFactor = 1.1

// cacheFloor: a member whose index is under 1/cacheFloor full takes its
// cold prefixes whatever the others hold (unless another member holds
// nothing at all; see placeCold), so that while caches are nearly empty
// (short chats) placement is the ring's, which independent routers agree
// on.
const cacheFloor = 8

// cacheSoleRouter: the cache bound applies while other routers' hinted
// load is under 1/cacheSoleRouter of the fleet's (see placeCold).
const cacheSoleRouter = 4

// placeCold places a cold prompt by the ring from key (home, spill chain,
// walk, under the bound), as prefix-aware does, unless the first candidate
// in ring order under its bound fails one of two further bounds; then the
// first candidate in ring order that passes all three takes it, or, if
// none does, the ring places it by load alone. why says which, for Explain.
//
//   - Work: a candidate with more queued work than the least loaded
//     candidate by more than coldMarginTokens, or a quarter of that
//     candidate's work if larger, is passed over. Only without load
//     hints: a router's queued prefill is only its own, and a prompt it
//     moves off its home is not where the routers that have not seen it
//     send its next turn.
//   - Cache: a candidate whose index would hold more than cacheLoadFactor ×
//     the candidates' mean entries (this prompt counted) is passed over,
//     unless it is under 1/cacheFloor full. Only while other routers'
//     hinted load is under 1/cacheSoleRouter of the fleet's: each router's
//     index sees only its share, and their walks would send one new prefix
//     to different members.
//     While some candidate under both bounds holds nothing, every candidate
//     that holds something but none of this prompt is over the cache bound
//     too, whatever cacheFloor says: the ring draws homes with repeats,
//     and prompts that every later request follows would leave members
//     that never serve. Routers without hints disagree on at most the
//     first prompts, until every member holds one.
func (p *prefixIndexPolicy) placeCold(e *pickEnv, req *Request, order []int32, key uint64, nb int) (result, string) {
	const byRing = "cold prefix: placed by the ring"
	hints := e.r.hints.Load()
	g := coldGate{p: p, e: e, byWork: hints == 0, byCache: hints == 0 || hints*cacheSoleRouter <= e.r.total.Load()+hints}
	if !g.byWork && !g.byCache {
		return p.ring.pickKey(e, req, key), byRing
	}
	g.measure(order, nb)
	// A failed take means a concurrent pick charged that member first;
	// look again with fresh loads.
	w := &p.ix.scratch.walk
	for attempt := 0; attempt <= len(order); attempt++ {
		w.reset(e, order, key)
		home, first, moved := int32(-1), true, false
		var why string
		for dist, i := 0, w.next(); i >= 0; dist, i = dist+1, w.next() {
			if home < 0 {
				home = i
			}
			lim := e.limit(i, true)
			if e.s.members[i].st.load()+1 > lim {
				continue
			}
			if f := g.fails(i); f != "" {
				if e.ex != nil {
					e.ex.skipNot(e.s.members[i].name, "cold-walk", f)
				}
				if first {
					why = f + "; placed on the first in ring order within the bounds"
				}
				first = false
				continue
			}
			if first {
				// The ring's own choice passes.
				return p.ring.pickKey(e, req, key), byRing
			}
			l, ok := e.take(i, lim, "prefix-index cold")
			if !ok {
				moved = true
				break
			}
			return result{idx: i, home: home, reason: ReasonSpill, dist: dist, load: l, bound: lim}, why
		}
		if !moved {
			break
		}
	}
	return p.ring.pickKey(e, req, key), byRing
}

// coldGate holds the work and cache bounds of one cold placement (see
// placeCold).
type coldGate struct {
	p               *prefixIndexPolicy
	e               *pickEnv
	byWork, byCache bool
	add             int64 // index entries this prompt adds
	bound           int64 // the cache bound in index entries
	// empty: some candidate under both bounds holds nothing.
	empty bool
	// least is the least queued work of the candidates under both the
	// request and the cache bound, so that one of them always passes; -1
	// when there is none or the work bound is off.
	least int64
}

// measure computes the bounds over the candidates in order for a prompt
// of nb blocks.
func (g *coldGate) measure(order []int32, nb int) {
	e, ix := g.e, g.p.ix
	g.add = int64(samples(nb))
	var sum int64
	for _, i := range order {
		sum += int64(ix.mem[e.s.members[i].st.id].n)
	}
	g.bound = int64(math.Ceil(cacheLoadFactor * float64(sum+g.add) / float64(len(order))))
	// A member that caches nothing takes a new prefix without evicting
	// anything, so while one does, every candidate that holds something,
	// but none of this prompt, is over the cache bound. One that holds
	// part of it (a short history or prompt the ring sent there before)
	// keeps it: moving it would be a miss.
	for _, i := range order {
		st := e.s.members[i].st
		if m := &ix.mem[st.id]; g.byCache && m.n == 0 && st.load()+1 <= e.limit(i, true) && !g.overBound(m) {
			g.empty = true
			break
		}
	}
	g.least = -1
	for _, i := range order {
		st := e.s.members[i].st
		if g.byWork && st.load()+1 <= e.limit(i, true) && !g.overCache(st.id) {
			if w := g.p.queued(st); g.least < 0 || w < g.least {
				g.least = w
			}
		}
	}
}

func (g *coldGate) overBound(m *idxMember) bool {
	return g.byCache && int64(m.n)+g.add > max(g.bound, int64(m.capacity/cacheFloor))
}

func (g *coldGate) elsewhere(id int32) bool {
	ix := g.p.ix
	return g.empty && ix.mem[id].n > 0 && ix.matched[id] == 0
}

func (g *coldGate) overCache(id int32) bool {
	return g.overBound(&g.p.ix.mem[id]) || g.elsewhere(id)
}

// fails says why candidate i may not take the prompt, or "".
func (g *coldGate) fails(i int32) string {
	st := g.e.s.members[i].st
	if m := &g.p.ix.mem[st.id]; g.overCache(st.id) {
		if g.elsewhere(st.id) {
			return fmt.Sprintf("cache bound: index holds %d entries while another candidate holds none", m.n)
		}
		return fmt.Sprintf("cache bound: index holds %d entries, bound %d", m.n, g.bound)
	}
	if margin := max(coldMarginTokens, g.least/coldMarginShare); g.byWork && g.least >= 0 && g.p.queued(st) > g.least+margin {
		return "cold prefix: more than " + strconv.FormatInt(margin, 10) + " tokens more queued work than the least loaded candidate"
	}
	return ""
}

// queued is the work already waiting on st, in prompt tokens: prefill
// charged and not started, and DecodeWeight per request it holds.
func (p *prefixIndexPolicy) queued(st *memberState) int64 {
	return max(0, st.prefill.Load()) + p.decode*st.load()
}

// cost is the predicted work of placing a prompt of promptTokens on st with
// matched tokens already there.
func (p *prefixIndexPolicy) cost(st *memberState, promptTokens int, matched int64) int64 {
	return missWeight*max(0, int64(promptTokens)-matched) + p.queued(st)
}

// charge fills the pick's prediction into res and, unless this is a dry
// run, charges the prefill, records the prompt in the chosen member's
// index and keeps in the pick's release slot what its outcome settles.
func (p *prefixIndexPolicy) charge(e *pickEnv, req *Request, res result, tokens func(int) int64) result {
	st := e.s.members[res.idx].st
	ix := p.ix
	matched := int(ix.matched[st.id])
	res.tokens = int(tokens(matched))
	if res.cost == 0 {
		res.cost = p.cost(st, req.PromptTokens, int64(res.tokens))
	}
	if e.ex != nil || e.dry {
		return res
	}
	// The release slot is taken here so that it can carry what the
	// outcome settles; tryPick takes one for the other picks.
	sl := slots.Get().(*releaseSlot)
	e.slot = sl
	sl.learner, sl.matched, sl.blocks = ix, matched, len(req.Blocks)
	sl.prefill = max(0, int64(req.PromptTokens-res.tokens))
	st.prefill.Add(sl.prefill)
	ix.insert(st.id, req.Blocks, heldSamples(matched, len(req.Blocks)))
	// Learning the answer holds the prompt's samples again: the entries
	// just held spare it their lookups. The slot takes the list and
	// leaves its old one to the index to fill next time.
	sl.sampled, ix.sampled = ix.sampled, sl.sampled[:0]
	return res
}

// zeroed returns b resized to n words, all zero, reusing its array.
func zeroed(b []uint64, n int) []uint64 {
	b = slices.Grow(b[:0], n)[:n]
	clear(b)
	return b
}

// explainCosts lists every candidate's prediction for Explain (none
// outside a dry run).
func (p *prefixIndexPolicy) explainCosts(e *pickEnv, req *Request, order []int32, res result, cold string) {
	if e.ex == nil {
		return
	}
	ix := p.ix
	nb := len(req.Blocks)
	var winCost int64 = -1
	winName := ""
	if res.status == picked {
		winName = e.s.members[res.idx].name
		st := e.s.members[res.idx].st
		winCost = p.cost(st, req.PromptTokens, int64(ix.matched[st.id])*int64(req.PromptTokens)/int64(nb))
	}
	for _, i := range order {
		m := &e.s.members[i]
		matched := int64(ix.matched[m.st.id]) * int64(req.PromptTokens) / int64(nb)
		c := CandidateCost{
			Backend:       m.name,
			MatchedTokens: int(matched),
			Cost:          int(p.cost(m.st, req.PromptTokens, matched)),
			Load:          int(m.st.load()),
			Bound:         int(e.limit(i, true)),
		}
		switch {
		case res.status == picked && i == res.idx:
			c.Why = "chosen"
		case int64(c.Load)+1 > int64(c.Bound):
			c.Why = fmt.Sprintf("at bound %d/%d", c.Load, c.Bound)
		case cold != "":
			c.Why = cold
		case winCost >= 0 && int64(c.Cost) <= winCost+p.decode*marginRequests:
			c.Why = "within the cost margin of " + winName + ", which comes first in ring order from the first block past the match"
		case winCost >= 0:
			c.Why = "costs " + strconv.Itoa(c.Cost) + " tokens of work against " + strconv.FormatInt(winCost, 10) + " on " + winName
		}
		e.ex.Costs = append(e.ex.Costs, c)
	}
}

// feedback compares a reported cached-token count with the prediction of
// matched blocks out of nblocks; when the member held noticeably less, it
// forgets that many of the member's least recently used blocks (in index
// entries of indexStride blocks, rounded up).
func (ix *prefixIndex) feedback(id int32, matched, nblocks, cached, promptTokens int) {
	if nblocks == 0 || promptTokens <= 0 {
		return
	}
	reported := int(int64(min(cached, promptTokens)) * int64(nblocks) / int64(promptTokens))
	// Engines cache whole KV blocks and never the last prompt token, and
	// the block estimate is approximate: allow two blocks and 1/32.
	short := matched - reported - 2 - matched/32
	if short <= 0 {
		return
	}
	ix.mispredictions.Add(1)
	ix.mu.Lock()
	ix.forget(id, (short+indexStride-1)/indexStride)
	ix.mu.Unlock()
}

// learn records that member id holds blocks. hints, if any, are the
// entries a pick held for the samples of its prompt, which blocks starts
// with (see holdBatch).
func (ix *prefixIndex) learn(id int32, blocks []uint64, hints []uint32) {
	ix.mu.Lock()
	ix.walk, ix.hints = ix.walk[:0], hints
	ix.insert(id, blocks, 0)
	ix.hints = nil
	ix.mu.Unlock()
}

// IndexStats is the prefix index's state (policy prefix-index).
type IndexStats struct {
	// Bytes is the index's memory, estimated from its tables.
	Bytes int64
	// MemberBytes is each current member's share: its clock ring and the
	// entries it holds.
	MemberBytes map[string]int64
	// MemberEntries is how many index entries (every fourth block of a
	// prompt and its last) each current member holds.
	MemberEntries map[string]int
	// Mispredictions counts outcomes whose cached tokens fell short of the
	// prediction; CorrectedBlocks counts the blocks they made it forget
	// (whole index entries of four blocks).
	Mispredictions, CorrectedBlocks uint64
}

// indexStats reports the index's memory and entries per member; the
// router adds the mispredictions of replaced policies.
func (p *prefixIndexPolicy) indexStats(members []memberView) IndexStats {
	stats := IndexStats{
		MemberBytes:   make(map[string]int64, len(members)),
		MemberEntries: make(map[string]int, len(members)),
	}
	p.ix.mu.Lock()
	for i := range members {
		m := &members[i]
		stats.MemberBytes[m.name], stats.Bytes = p.ix.memory(m.st.id)
		stats.MemberEntries[m.name] = p.ix.held(m.st.id)
	}
	if len(members) == 0 {
		_, stats.Bytes = p.ix.memory(-1)
	}
	p.ix.mu.Unlock()
	stats.Mispredictions = p.ix.mispredictions.Load()
	stats.CorrectedBlocks = p.ix.corrections.Load()
	return stats
}
