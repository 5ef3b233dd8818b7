package sim

import (
	"math"
	"slices"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/route"
)

// The oracle is precise KV-event routing with no delay: prefix-index's cost
// model (route/policy_prefixindex.go) fed with what the replicas really
// hold. Where prefix-index predicts a candidate's cached prefix from the
// prompts it sent there, the oracle reads the engine's CachedPrefix; where
// a router counts its own in-flight requests, the oracle sees the fleet's.
// It balances as a good cache-aware router does, so it is the ceiling of
// precise routing with that cost model, not of every policy: a greedy
// reader of the true cache that ignores load piles hot prefixes onto one
// replica and loses both latency and, once that replica evicts, hits.
//
// The constants are route's defaults, repeated because route keeps them
// unexported: a miss costs oracleMissWeight tokens of work per uncached
// prompt token, a request held costs route.DefaultDecodeWeight, and a
// prompt whose best holder has less than oracleWarmTokens more cached than
// every replica (with several holders at that length) is cold. A cold
// prompt goes to its ring home unless the home fails one of prefix-index's
// cold-placement bounds (placeCold), here read from the engines:
//
//   - Request: the home holds the bound's share of in-flight requests.
//   - Cache: the home's KV cache (blocks in use plus cached free blocks)
//     would hold more than oracleCacheLoadFactor × the replicas' mean,
//     this prompt's blocks counted, and is at least 1/oracleCacheFloor
//     full; or some replica within the request and cache bounds caches
//     nothing while the home caches something but none of this prompt.
//   - Work: the home has more queued work (pending prefill and decode
//     weight per request) than the least loaded replica within the
//     request and cache bounds by more than the margin:
//     max(oracleColdMarginTokens, that least/oracleColdMarginShare).
//
// Then it goes to the cheapest replica within all three bounds (within
// the request bound if none is), where prefix-index takes the first such
// candidate in ring order: the oracle keeps no ring order but the home's.
const (
	oracleMissWeight       = 8
	oracleWarmTokens       = 160
	oracleColdMarginTokens = 1024
	oracleColdMarginShare  = 4
	oracleCacheLoadFactor  = 1.1
	oracleCacheFloor       = 8
)

type oraclePicker struct {
	f      *fleet
	active []int
	ring   *route.Router // ring homes only (consistent-hash: no load kept)
	names  map[string]int
	cached []int // scratch: true cached prefix per replica
	held   []int // scratch: KV cache blocks each replica holds (cold path)
	blocks []uint64
}

// oracleFlight is the prefill the oracle charged for one request.
type oracleFlight struct {
	prefill int64
	done    bool
}

func newOraclePicker(f *fleet, seed uint64) picker {
	r, err := route.New(route.Config{Policy: "consistent-hash", Seed: seed}, members(f.active, 0))
	if err != nil {
		panic(err) // consistent-hash over named members cannot fail
	}
	p := &oraclePicker{f: f, ring: r, names: map[string]int{}}
	p.index(f.active)
	return p
}

func (p *oraclePicker) index(active []int) {
	p.active = slices.Clone(active)
	for _, a := range active {
		p.names[replicaName(a)] = a
	}
}

// bound is the bound prefix-index keeps on a fleet-wide in-flight count:
// max(ceil(c·(total+1)/n), ceil((total+1)/n) + slack).
func (p *oraclePicker) bound() int {
	n := len(p.active)
	t := p.f.total + 1
	c := p.f.opts.LoadFactor
	if c == 0 {
		c = route.DefaultLoadFactor
	}
	b := int(math.Ceil(c * float64(t) / float64(n)))
	if p.f.slack > 0 {
		b = max(b, (t+n-1)/n+p.f.slack)
	}
	return b
}

func (p *oraclePicker) cost(a, promptTokens int) int64 {
	return oracleMissWeight*int64(promptTokens-p.cached[a]) + p.queued(a)
}

// queued is replica a's waiting work in prompt tokens: the prefill charged
// and not started, and the decode weight of the requests it holds.
func (p *oraclePicker) queued(a int) int64 {
	return p.f.oraclePending[a] + int64(route.DefaultDecodeWeight*p.f.inflight[a])
}

// coldFits returns whether a cold prompt of promptTokens, of which every
// replica caches common, may go to replica a under the cache and work
// bounds (see the constants), lim being the request bound.
func (p *oraclePicker) coldFits(promptTokens, common, lim int) func(a int) bool {
	f := p.f
	add := (promptTokens - common + vllmsim.BlockSize - 1) / vllmsim.BlockSize
	sum := 0
	for _, a := range p.active {
		s := f.reps[a].eng.Stats()
		p.held[a] = s.UsedBlocks + s.CachedBlocks
		sum += p.held[a]
	}
	bound := int(math.Ceil(oracleCacheLoadFactor * float64(sum+add) / float64(len(p.active))))
	overBound := func(a int) bool {
		return p.held[a]+add > max(bound, f.reps[a].eng.Config().CacheBlocks/oracleCacheFloor)
	}
	// A replica caching nothing takes a new prefix without evicting
	// anything; while one within the bounds does, a replica holding
	// something but none of this prompt is over the cache bound.
	empty := false
	for _, a := range p.active {
		if p.held[a] == 0 && f.inflight[a]+1 <= lim && !overBound(a) {
			empty = true
			break
		}
	}
	overCache := func(a int) bool {
		return overBound(a) || empty && p.held[a] > 0 && p.cached[a] == 0
	}
	least := int64(-1)
	for _, a := range p.active {
		if f.inflight[a]+1 <= lim && !overCache(a) && (least < 0 || p.queued(a) < least) {
			least = p.queued(a)
		}
	}
	margin := max(oracleColdMarginTokens, least/oracleColdMarginShare)
	return func(a int) bool {
		return !overCache(a) && (least < 0 || p.queued(a) <= least+margin)
	}
}

func (p *oraclePicker) pick(fl *flight) (int, bool) {
	f := p.f
	for len(f.oraclePending) < len(f.reps) {
		f.oraclePending = append(f.oraclePending, 0)
	}
	for len(p.cached) < len(f.reps) {
		p.cached = append(p.cached, 0)
		p.held = append(p.held, 0)
	}
	prompt := fl.prompt()
	req := vllmsim.Request{Prompt: prompt}
	if f.w.Salted {
		req.CacheSalt = fl.req.Group
	}
	best, common, nBest := 0, len(prompt), 0
	for _, a := range p.active {
		n := f.reps[a].eng.CachedPrefix(req)
		p.cached[a] = n
		common = min(common, n)
		switch {
		case n > best:
			best, nBest = n, 1
		case n == best:
			nBest++
		}
	}
	lim := p.bound()
	pickIdx := -1
	fits := func(int) bool { return true } // warm: no cold bounds
	if best-common < vllmsim.BlockSize || best-common < oracleWarmTokens && nBest > 1 {
		// Cold: the ring home of the first block past the start every
		// replica holds (the key itself when none holds any), so
		// concurrent requests for a new prefix meet on one replica.
		key := fl.req.key.Key
		if common > 0 {
			p.blocks = fl.req.appendBlocks(p.blocks[:0])
			if nb := len(p.blocks); nb > 0 {
				key = p.blocks[min(nb-1, common*nb/len(prompt))]
			}
		}
		fits = p.coldFits(len(prompt), common, lim)
		if h, ok := p.names[p.ring.Home(key)]; ok && f.inflight[h]+1 <= lim && fits(h) {
			pickIdx = h
		}
	}
	if pickIdx < 0 {
		// Warm, or the home fails a bound: the cheapest replica within
		// the bounds (below the request bound, then the cheapest of all,
		// if none is); ties to the longer cached prefix, then the lower
		// index.
		var bestCost int64
		rank := -1
		for _, a := range p.active {
			r := 0
			if f.inflight[a]+1 <= lim {
				r = 1
				if fits(a) {
					r = 2
				}
			}
			c := p.cost(a, len(prompt))
			if r > rank || r == rank && (c < bestCost || c == bestCost && p.cached[a] > p.cached[pickIdx]) {
				pickIdx, bestCost, rank = a, c, r
			}
		}
	}
	of := &oracleFlight{prefill: int64(len(prompt) - p.cached[pickIdx])}
	f.oraclePending[pickIdx] += of.prefill
	fl.peer = of
	return pickIdx, true
}

// firstToken ends the request's prefill charge.
func (p *oraclePicker) firstToken(fl *flight, _, _ int) {
	of := fl.peer.(*oracleFlight)
	if !of.done {
		of.done = true
		p.f.oraclePending[fl.replica] -= of.prefill
	}
}

func (p *oraclePicker) done(fl *flight) {
	p.firstToken(fl, 0, 0)
	fl.peer = nil
}

func (p *oraclePicker) setMembers(active []int) error {
	p.index(active)
	return p.ring.SetMembers(members(active, 0))
}

// hint is ignored: the oracle reads the fleet's in-flight counts.
func (p *oraclePicker) hint(active, inflight []int) {}
