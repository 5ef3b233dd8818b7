package sim

import (
	"container/list"
	"slices"
	"time"
)

// giePicker is the Gateway API Inference Extension endpoint picker (used by
// llm-d) with its default scheduling profile
// (kubernetes-sigs/gateway-api-inference-extension: the inferencepool
// chart's default plugins config; the prefix-cache scorer in
// pkg/epp/scheduling/framework/plugins/multi/prefix; the queue and
// kv-cache-utilization scorers; the max-score picker):
//
//   - prefix-cache-scorer, weight 3: the prompt is cut into 64-character
//     blocks (at most 256, the rest ignored; a shorter last block dropped),
//     hashed in a chain that starts from the model name. Each server has an
//     LRU of 31,250 block hashes it was sent. Walking the blocks from the
//     first while any server holds the block, each server holding it gets
//     one point; the score is points / blocks.
//   - queue-scorer, weight 2: (max − q) / (max − min) over the servers'
//     waiting-queue lengths, 1 when all are equal.
//   - kv-cache-utilization-scorer, weight 2: 1 − KV cache usage.
//   - max-score-picker: the highest weighted sum wins; ties at random.
//   - After the pick, the request's blocks are added to the chosen server's
//     LRU.
//
// Queue length and KV usage are scraped from the replicas (vLLM's
// num_requests_waiting and KV cache usage), refreshed every 50 ms of virtual
// time as the endpoint picker's default metrics refresh interval does.
type giePicker struct {
	f      *fleet
	active []int
	lru    map[int]*gieLRU
	owners map[uint64]repSet
	rnd    rng
	text   []byte
	hashes []uint64
	points map[int]int
	ties   []int
}

// GIE defaults.
const (
	gieBlock        = 64
	gieMaxBlocks    = 256
	gieLRUCapacity  = 31250
	gieWeightPrefix = 3.0
	gieWeightQueue  = 2.0
	gieWeightKV     = 2.0
	gieRefresh      = 50 * time.Millisecond
)

type gieLRU struct {
	l *list.List // of uint64, most recent at the front
	m map[uint64]*list.Element
}

func newGIEPicker(f *fleet, seed uint64) picker {
	p := &giePicker{f: f, lru: map[int]*gieLRU{}, owners: map[uint64]repSet{}, rnd: rng{seed}, points: map[int]int{}}
	_ = p.setMembers(f.active)
	return p
}

func (p *giePicker) setMembers(active []int) error {
	p.active = slices.Clone(active)
	for _, a := range active {
		if p.lru[a] == nil {
			p.lru[a] = &gieLRU{l: list.New(), m: map[uint64]*list.Element{}}
		}
	}
	return nil
}

func (p *giePicker) pick(fl *flight) (int, bool) {
	p.text = routingText(p.text[:0], fl.req, "\n")
	p.hashes = p.hashes[:0]
	if len(p.text) >= gieBlock {
		t := p.text[:min(len(p.text), gieBlock*gieMaxBlocks)]
		// hash 0 stands for the model name: one model here.
		p.hashes = append(p.hashes, mix(0x91e))
		p.hashes = chainChunks(p.hashes, t, gieBlock, p.hashes[0], false)
	}
	clear(p.points)
	for _, h := range p.hashes {
		own := p.owners[h]
		anyone := false
		for _, a := range p.active {
			if own.has(a) {
				p.points[a]++
				anyone = true
			}
		}
		if !anyone {
			break
		}
	}
	m := p.f.metrics(fl.now, gieRefresh)
	minQ, maxQ := -1, -1
	for _, a := range p.active {
		q := m[a].waiting
		if minQ < 0 || q < minQ {
			minQ = q
		}
		maxQ = max(maxQ, q)
	}
	best := 0.0
	p.ties = p.ties[:0]
	for _, a := range p.active {
		prefix := 0.0
		if len(p.hashes) > 0 {
			prefix = float64(p.points[a]) / float64(len(p.hashes))
		}
		queue := 1.0
		if maxQ > minQ {
			queue = float64(maxQ-m[a].waiting) / float64(maxQ-minQ)
		}
		kv := 1 - m[a].kvUsage
		score := gieWeightPrefix*prefix + gieWeightQueue*queue + gieWeightKV*kv
		switch {
		case len(p.ties) == 0 || score > best:
			best, p.ties = score, append(p.ties[:0], a)
		case score == best:
			p.ties = append(p.ties, a)
		}
	}
	choice := p.rnd.pickTie(p.ties)
	p.add(choice)
	return choice, true
}

// add records the request's blocks in server a's LRU, evicting the least
// recently added past capacity.
func (p *giePicker) add(a int) {
	c := p.lru[a]
	for _, h := range p.hashes {
		if e, ok := c.m[h]; ok {
			c.l.MoveToFront(e)
			continue
		}
		c.m[h] = c.l.PushFront(h)
		s := p.owners[h]
		s.add(a)
		p.owners[h] = s
		if c.l.Len() > gieLRUCapacity {
			old := c.l.Back()
			oh := old.Value.(uint64)
			c.l.Remove(old)
			delete(c.m, oh)
			s := p.owners[oh]
			s[a>>6] &^= 1 << (a & 63)
			if isEmpty(s) {
				delete(p.owners, oh)
			} else {
				p.owners[oh] = s
			}
		}
	}
}

func isEmpty(s repSet) bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

func (p *giePicker) done(*flight) {}

// hint is ignored: the endpoint picker reads scraped metrics instead.
func (p *giePicker) hint(active, inflight []int) {}
