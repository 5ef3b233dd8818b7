package sim

import (
	"slices"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// dynamoPicker is NVIDIA Dynamo's KV router in approximate mode
// (--no-kv-events; ai-dynamo/dynamo, lib/llm/src/kv_router: the scheduler's
// default worker selector, the approximate indexer and the router's active
// sequence tracking), with its defaults:
//
//   - Blocks are the engine's KV blocks (16 tokens, chained hashes of the
//     token ids), as the router tokenizes the prompt.
//   - Overlap: the approximate indexer assumes that a worker holds every
//     block of every request it was sent, for a TTL of 120 s after the
//     routing decision; a worker's overlap is the number of leading request
//     blocks it holds by that rule.
//   - Load is the router's own active-sequence view: per worker, the prefill
//     tokens of requests whose first token has not come back yet, and the
//     distinct blocks of its active requests.
//   - Cost per worker = overlap_score_weight (1.0) × potential prefill blocks
//   - potential decode blocks, where potential prefill blocks = (the
//     worker's pending prefill tokens + the request's tokens − overlap ×
//     block size) / block size, and potential decode blocks = the worker's
//     active blocks plus the request's blocks it does not already hold.
//   - router_temperature 0: the lowest cost wins; ties are drawn at random.
//
// Approximation: a request's active blocks are its prompt blocks; the blocks
// its answer adds as it decodes are not counted.
type dynamoPicker struct {
	active  []int
	workers map[int]*dynWorker
	cached  map[uint64][]time.Time // block hash -> expiry per replica
	rnd     rng
	ties    []int
	pruned  time.Time // last sweep of expired predictions
}

// Dynamo KV router defaults.
const (
	dynOverlapWeight = 1.0
	dynTTL           = 120 * time.Second
)

type dynWorker struct {
	prefillTokens int
	blocks        map[uint64]int // active block -> active requests holding it
}

type dynFlight struct {
	prefill   int
	blocks    []uint64
	prefilled bool
}

func newDynamoPicker(f *fleet, seed uint64) picker {
	p := &dynamoPicker{workers: map[int]*dynWorker{}, cached: map[uint64][]time.Time{}, rnd: rng{seed}}
	_ = p.setMembers(f.active)
	return p
}

func (p *dynamoPicker) setMembers(active []int) error {
	p.active = slices.Clone(active)
	for _, a := range active {
		if p.workers[a] == nil {
			p.workers[a] = &dynWorker{blocks: map[uint64]int{}}
		}
	}
	return nil
}

func (p *dynamoPicker) overlap(a int, blocks []uint64, now time.Time) int {
	n := 0
	for _, h := range blocks {
		exp := p.cached[h]
		if a >= len(exp) || !exp[a].After(now) {
			break
		}
		n++
	}
	return n
}

func (p *dynamoPicker) pick(fl *flight) (int, bool) {
	if fl.now.Sub(p.pruned) >= dynTTL {
		p.prune(fl.now)
	}
	blocks := fl.blockHashes()
	isl := len(fl.prompt())
	const bs = vllmsim.BlockSize
	best := 0.0
	p.ties = p.ties[:0]
	for _, a := range p.active {
		w := p.workers[a]
		ov := p.overlap(a, blocks, fl.now)
		prefill := float64(w.prefillTokens+max(isl-ov*bs, 0)) / bs
		decode := len(w.blocks)
		for _, h := range blocks {
			if w.blocks[h] == 0 {
				decode++
			}
		}
		cost := dynOverlapWeight*prefill + float64(decode)
		switch {
		case len(p.ties) == 0 || cost < best:
			best, p.ties = cost, append(p.ties[:0], a)
		case cost == best:
			p.ties = append(p.ties, a)
		}
	}
	choice := p.rnd.pickTie(p.ties)
	w := p.workers[choice]
	ov := p.overlap(choice, blocks, fl.now)
	df := &dynFlight{prefill: max(isl-ov*bs, 0), blocks: slices.Clone(blocks)}
	w.prefillTokens += df.prefill
	for _, h := range blocks {
		w.blocks[h]++
		exp := p.cached[h]
		for choice >= len(exp) {
			exp = append(exp, time.Time{})
		}
		exp[choice] = fl.now.Add(dynTTL)
		p.cached[h] = exp
	}
	fl.peer = df
	return choice, true
}

// prune forgets predictions that expired on every worker, as the
// approximate indexer's expiry does, so memory follows the TTL window.
func (p *dynamoPicker) prune(now time.Time) {
	p.pruned = now
	for h, exp := range p.cached {
		live := false
		for _, e := range exp {
			if e.After(now) {
				live = true
				break
			}
		}
		if !live {
			delete(p.cached, h)
		}
	}
}

// firstToken ends the request's prefill in the router's view.
func (p *dynamoPicker) firstToken(fl *flight, _, _ int) {
	df := fl.peer.(*dynFlight)
	if !df.prefilled {
		df.prefilled = true
		p.workers[fl.replica].prefillTokens -= df.prefill
	}
}

func (p *dynamoPicker) done(fl *flight) {
	p.firstToken(fl, 0, 0)
	df := fl.peer.(*dynFlight)
	w := p.workers[fl.replica]
	for _, h := range df.blocks {
		if w.blocks[h]--; w.blocks[h] <= 0 {
			delete(w.blocks, h)
		}
	}
	fl.peer = nil
}

// hint is ignored: the router tracks its own active sequences.
func (p *dynamoPicker) hint(active, inflight []int) {}
