package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prefixgate/prefixgate/route"
)

// Policy names the simulator compares. The first four are package route's
// policies; cache-aware-tree is implemented here.
var PolicyNames = []string{"random", "least-outstanding", "prefix-aware", "consistent-hash", "cache-aware-tree", "prefix-index"}

const treePolicy = "cache-aware-tree"

// picker is one router's view of the fleet.
type picker interface {
	// pick chooses an active replica for f and charges it, or reports false
	// when every candidate is saturated.
	pick(f *flight) (int, bool)
	// firstToken reports f's first token and the engine's cached and
	// prompt token counts.
	firstToken(f *flight, cached, prompt int)
	// done releases f's charge.
	done(f *flight)
	// setMembers replaces the active replicas.
	setMembers(active []int) error
	// hint reports the fleet's in-flight count of each active replica
	// (inflight is indexed by replica).
	hint(active, inflight []int)
}

// routePicker is a real route.Router.
type routePicker struct {
	r      *route.Router
	names  []string // replica index -> member name
	idx    map[string]int
	blocks []uint64 // scratch: a request's blocks
	// withBlocks passes prompt blocks (only prefix-index reads them);
	// learn also hands it the answers' blocks.
	withBlocks, learn bool
}

func replicaName(i int) string { return fmt.Sprintf("r%d", i) }

func members(active []int, threshold int) []route.Member {
	ms := make([]route.Member, len(active))
	for i, a := range active {
		ms[i] = route.Member{Name: replicaName(a), Threshold: threshold}
	}
	return ms
}

func newRoutePicker(cfg route.Config, active []int, threshold int, learn bool) (*routePicker, error) {
	r, err := route.New(cfg, members(active, threshold))
	if err != nil {
		return nil, err
	}
	p := &routePicker{r: r, idx: map[string]int{}, withBlocks: cfg.Policy == "prefix-index", learn: learn}
	p.index(active)
	return p, nil
}

func (p *routePicker) index(active []int) {
	for _, a := range active {
		p.idx[replicaName(a)] = a
	}
}

func (p *routePicker) pick(f *flight) (int, bool) {
	req := f.req.key
	if p.withBlocks {
		p.blocks = f.req.appendBlocks(p.blocks[:0])
		req.Blocks, req.PromptTokens = p.blocks, f.req.est
	}
	d, err := p.r.TryPick(req)
	if err != nil {
		if errors.Is(err, route.ErrSaturated) || errors.Is(err, route.ErrNoCandidates) {
			return 0, false
		}
		panic(err) // TryPick returns no other errors
	}
	f.dec = d
	f.spilled = d.Reason == route.ReasonSpill || d.Reason == route.ReasonSpillChain
	return p.idx[d.Backend], true
}

// firstToken feeds the engine's cached-token count back to the router:
// the prefill charge ends and the index checks its prediction.
func (p *routePicker) firstToken(f *flight, cached, prompt int) {
	f.dec.Report(route.Outcome{FirstByte: true, CachedTokens: cached, PromptTokens: prompt})
}

// done ends the request; the replica now holds the answer too, which is
// the next turn's prefix, so the index learns it.
func (p *routePicker) done(f *flight) {
	o := route.Outcome{PromptTokens: -1, CachedTokens: -1}
	if p.withBlocks && p.learn && f.req.answer != nil {
		p.blocks = append(f.req.appendBlocks(p.blocks[:0]), f.req.answer...)
		o.Blocks = p.blocks
	}
	f.dec.DoneWith(o)
}

func (p *routePicker) setMembers(active []int) error {
	p.index(active)
	return p.r.SetMembers(members(active, p.r.Config().DefaultThreshold))
}

func (p *routePicker) home(key uint64) string { return p.r.Home(key) }

func (p *routePicker) hint(active, inflight []int) {
	for _, a := range active {
		p.r.SetLoadHint(replicaName(a), inflight[a])
	}
}

// treePicker is the cache-aware-tree reference, built from the SGLang
// router's description: each router keeps, per replica, an approximate
// prefix tree of the prompts it sent there (here: the chained hashes of
// 16-token blocks, a trie flattened into a set, with LRU trimming past a size
// limit). A request goes to the replica with the longest matched prefix when
// the match ratio is above MatchThreshold, else to the least loaded; and
// whenever the loads are imbalanced (max-min > AbsThreshold and max >
// RelThreshold×min) to the least loaded. Loads are this router's own
// in-flight counts. Replicas at their concurrency threshold are skipped.
type treePicker struct {
	active    []int
	load      map[int]int
	trees     map[int]*blockTree
	threshold int
	seq       int64
	rnd       uint64
}

// Tree policy parameters (documented in docs/simulation.md).
const (
	treeMatchThreshold = 0.5
	treeAbsThreshold   = 32
	treeRelThreshold   = 1.5
	treeMaxBlocks      = 1 << 20 // 2^26 characters of text at 64 characters per block
)

type blockTree struct {
	seen map[uint64]int64 // block chain hash -> last use
}

func newTreePicker(active []int, threshold int, seed uint64) *treePicker {
	p := &treePicker{load: map[int]int{}, trees: map[int]*blockTree{}, threshold: threshold, rnd: seed}
	_ = p.setMembers(active)
	return p
}

func (p *treePicker) setMembers(active []int) error {
	p.active = slices.Clone(active)
	for _, a := range active {
		if p.trees[a] == nil {
			p.trees[a] = &blockTree{seen: map[uint64]int64{}}
		}
	}
	return nil
}

func (p *treePicker) pick(f *flight) (int, bool) {
	hashes := f.blockHashes()
	minI, maxL, minL := -1, -1, 0
	for _, a := range p.active {
		l := p.load[a]
		if l >= p.threshold {
			continue
		}
		if minI < 0 || l < minL || l == minL && p.coin() {
			minI, minL = a, l
		}
		maxL = max(maxL, l)
	}
	if minI < 0 {
		return 0, false
	}
	maxL = 0
	minAll := -1
	for _, a := range p.active {
		maxL = max(maxL, p.load[a])
		if minAll < 0 || p.load[a] < minAll {
			minAll = p.load[a]
		}
	}
	choice := minI
	if maxL-minAll > treeAbsThreshold && float64(maxL) > treeRelThreshold*float64(minAll) {
		f.spilled = true // balance overrode the cache
	} else {
		best, bestN := -1, 0
		for _, a := range p.active {
			if p.load[a] >= p.threshold {
				continue
			}
			n := p.trees[a].match(hashes)
			if n > bestN || n == bestN && best >= 0 && p.load[a] < p.load[best] {
				best, bestN = a, n
			}
		}
		if best >= 0 && len(hashes) > 0 && float64(bestN)/float64(len(hashes)) > treeMatchThreshold {
			choice = best
		}
	}
	p.seq++
	p.trees[choice].insert(hashes, p.seq)
	p.load[choice]++
	f.treeOwner = p
	return choice, true
}

func (p *treePicker) coin() bool {
	p.rnd = mix(p.rnd)
	return p.rnd&1 == 0
}

func (p *treePicker) done(f *flight) { p.load[f.replica]-- }

func (p *treePicker) firstToken(*flight, int, int) {}

// hint is ignored: the tree reference keeps its own load view, as the
// SGLang router does.
func (p *treePicker) hint(active, inflight []int) {}

func (t *blockTree) match(hashes []uint64) int {
	n := 0
	for _, h := range hashes {
		if _, ok := t.seen[h]; !ok {
			break
		}
		n++
	}
	return n
}

func (t *blockTree) insert(hashes []uint64, seq int64) {
	for _, h := range hashes {
		t.seen[h] = seq
	}
	if len(t.seen) > treeMaxBlocks {
		// Trim the least recently used tenth, as the tree's periodic
		// eviction would.
		ages := make([]int64, 0, len(t.seen))
		for _, s := range t.seen {
			ages = append(ages, s)
		}
		slices.Sort(ages)
		cut := ages[len(ages)/10]
		for h, s := range t.seen {
			if s <= cut {
				delete(t.seen, h)
			}
		}
	}
}
