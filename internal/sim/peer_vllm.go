package sim

import "slices"

// vllmPrefixPicker is the vLLM production-stack router's prefixaware logic
// (vllm-project/production-stack, src/vllm_router/routers/routing_logic.py,
// PrefixAwareRouter, over src/vllm_router/prefix/hashtrie.py), with its
// defaults:
//
//   - The routing text is the prompt, or for a chat the message contents
//     joined by newlines.
//   - The text is cut into 128-character chunks, each hashed; the chunks
//     form a trie whose every node records the endpoints that were sent a
//     text through it. There is no eviction: the trie only grows.
//   - The longest match walks the trie from the root, narrowing the set of
//     available endpoints to those recorded at each node, and stops at the
//     first chunk with no node or no endpoint left in the set; with no match
//     the set is every available endpoint.
//   - The request goes to an endpoint drawn at random from that set, and its
//     text is inserted for that endpoint. Load plays no part.
//
// The trie is flattened into a map from chained chunk hashes to endpoint
// sets, which is the same trie.
type vllmPrefixPicker struct {
	active []int
	nodes  map[uint64]repSet
	rnd    rng
	text   []byte
	chunks []uint64
	set    []int
}

// vllmChunk is HashTrie's default chunk size in characters.
const vllmChunk = 128

func newVLLMPrefixPicker(f *fleet, seed uint64) picker {
	return &vllmPrefixPicker{active: slices.Clone(f.active), nodes: map[uint64]repSet{}, rnd: rng{seed}}
}

func (p *vllmPrefixPicker) pick(fl *flight) (int, bool) {
	p.text = routingText(p.text[:0], fl.req, "\n")
	p.chunks = chainChunks(p.chunks[:0], p.text, vllmChunk, 0x7611, true)
	p.set = append(p.set[:0], p.active...)
	for _, h := range p.chunks {
		eps, ok := p.nodes[h]
		if !ok {
			break
		}
		k := 0
		for _, a := range p.set {
			if eps.has(a) {
				p.set[k] = a
				k++
			}
		}
		if k == 0 {
			break
		}
		p.set = p.set[:k]
	}
	choice := p.rnd.pickTie(p.set)
	for _, h := range p.chunks {
		s := p.nodes[h]
		s.add(choice)
		p.nodes[h] = s
	}
	return choice, true
}

func (p *vllmPrefixPicker) done(*flight) {}

func (p *vllmPrefixPicker) setMembers(active []int) error {
	p.active = slices.Clone(active)
	return nil
}

// hint is ignored: prefixaware does not look at load.
func (p *vllmPrefixPicker) hint(active, inflight []int) {}
