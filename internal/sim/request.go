package sim

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// Request is one simulated request: a chat (Messages) or a completion
// prompt (Prompt), arriving At after the start of the run.
type Request struct {
	At       time.Duration
	Group    string
	Messages []Message // chat requests
	Prompt   []Segment // completion requests (trace replay)
	Output   int       // output tokens
	// Think is, for a turn that follows another (a session), the time
	// between the previous turn's answer and this request. Such a turn
	// arrives Think after the previous turn finished in the run that
	// simulates it; At is then only its nominal arrival (pooled bound, live
	// load).
	Think time.Duration
	// Flow is the request's fairness id and Priority its band (higher
	// first; negative is sheddable); "" when the workload has no flows.
	Flow     string
	Priority int
	// Placed says Replica holds the index of the replica a recorded run
	// sent this request to; policy ReplayPolicy sends it there again.
	Placed  bool
	Replica int

	index   int      // position in the workload, set by Simulate
	follows bool     // arrives after the previous turn's answer
	next    *Request // the session's next turn
	dropped bool     // cut by the request count

	key route.Request // filled by keyer
	// Prefix-index blocks, filled by keyer.blocks: per message (or prompt
	// segment) its run of block hashes, shared with every request that has
	// the same history; answer is the run of the answer this request got,
	// when a later request of the workload carries it.
	blk    [][]uint64
	chain  []uint64 // chain value before each message
	out    uint64   // chain value after the last
	answer []uint64
	parent *Request // the previous turn, whose answer this one carries
	est    int      // PromptTokens estimate: routing characters / 4
}

// routeBlockWords is how many segment words (tokens, 4 characters each) one
// routing block covers: normalize's 64-character blocks.
const routeBlockWords = 64 / charsPerTok

// blockRun is one message's blocks and the chain value after them.
type blockRun struct {
	blocks []uint64
	out    uint64
	chars  int
}

// blocks fills r's prefix-index blocks with normalize's layout: the group
// and model seed the chain; each message (a completion prompt: each
// segment) starts with its role and is cut into blocks of 64 characters,
// its trailing partial block hashed too, the chain running on into the next
// message. Hashes are over word ids, not text (the sim never builds the
// text), and runs are cached by chain value and content, so a history shared
// by many requests is hashed once.
func (k *keyer) blocks(r *Request) {
	chain := mix(0x5eed ^ xxh3.HashString(simModel) ^ xxh3.HashString(r.Group)<<1)
	chars := 0
	add := func(role string, segs []Segment) {
		run := k.run(chain, role, segs)
		r.chain = append(r.chain, chain)
		r.blk = append(r.blk, run.blocks)
		chain = run.out
		chars += run.chars
	}
	if r.Messages == nil {
		for i := range r.Prompt {
			add("", r.Prompt[i:i+1])
		}
	} else {
		for _, m := range r.Messages {
			add(m.Role, m.Content)
		}
	}
	r.out = chain
	r.est = max(1, chars/charsPerTok)
}

func (k *keyer) run(chain uint64, role string, segs []Segment) blockRun {
	b := binary.LittleEndian.AppendUint64(k.idBuf[:0], chain)
	b = append(b, role...)
	b = append(b, 0)
	for _, s := range segs {
		b = binary.LittleEndian.AppendUint64(b, s.ID)
		b = binary.LittleEndian.AppendUint32(b, uint32(s.Tokens))
	}
	k.idBuf = b
	id := xxh3.Hash(b)
	if run, ok := k.runs[id]; ok {
		return run
	}
	h := mix(chain ^ xxh3.HashString(role))
	var run blockRun
	in := 0
	words := 0
	for _, s := range segs {
		for j := range s.Tokens {
			h = mix(h ^ uint64(wordAt(s.ID, j)))
			if in++; in == routeBlockWords {
				run.blocks = append(run.blocks, h)
				in = 0
			}
		}
		words += s.Tokens
	}
	if in > 0 || len(run.blocks) == 0 {
		run.blocks = append(run.blocks, h)
	}
	run.out = h
	run.chars = len(role) + 2 + words*charsPerTok
	k.runs[id] = run
	return run
}

// linkAnswers gives each chat request the blocks of its answer: a later
// request whose history is this request's messages followed by an
// assistant message (and its next user or tool message) carries it.
func linkAnswers(reqs []*Request) {
	byOut := make(map[uint64]*Request, len(reqs))
	for _, r := range reqs {
		if r.Messages != nil {
			byOut[r.out] = r
		}
	}
	for _, r := range reqs {
		n := len(r.Messages)
		if n < 3 || r.Messages[n-2].Role != "assistant" {
			continue
		}
		if parent := byOut[r.chain[n-2]]; parent != nil && parent.At <= r.At {
			if parent.answer == nil {
				parent.answer = r.blk[n-2]
			}
			r.parent = parent
		}
	}
}

// appendBlocks appends r's prompt blocks to dst.
func (r *Request) appendBlocks(dst []uint64) []uint64 {
	for _, b := range r.blk {
		dst = append(dst, b...)
	}
	return dst
}

// PromptTokens is the prompt length in engine tokens.
func (r *Request) PromptTokens() int {
	if r.Messages == nil {
		return segTokens(r.Prompt)
	}
	n := len(tmpl("<|begin_of_text|>")) + len(tmpl("<|start_header_id|>assistant<|end_header_id|>\n\n"))
	for _, m := range r.Messages {
		n += len(tmpl("<|start_header_id|>"+m.Role+"<|end_header_id|>\n\n")) + segTokens(m.Content) + len(tmpl("<|eot_id|>"))
	}
	return n
}

// appendTokens appends the engine prompt tokens.
func (r *Request) appendTokens(dst []vllmsim.Token) []vllmsim.Token {
	if r.Messages == nil {
		for _, s := range r.Prompt {
			dst = appendSegTokens(dst, s)
		}
		return dst
	}
	return chatTokens(dst, r.Messages)
}

// simModel is the model name in keyed bodies.
const simModel = "sim"

// keyer computes routing keys through package normalize on compact bodies:
// the body carries the text only as far as the routing text and its longest
// spill window reach, and keys are cached by what determines them (group,
// roles and segments of the keyed part).
type keyer struct {
	opts  normalize.KeyOptions
	limit int // bytes of text the key can read: 8N plus slack
	cache map[uint64]route.Request
	body  []byte
	dst   []byte
	runs  map[uint64]blockRun
	idBuf []byte
}

func newKeyer(prefixLength int) *keyer {
	if prefixLength == 0 {
		prefixLength = normalize.DefaultPrefixLength
	}
	return &keyer{
		opts:  normalize.KeyOptions{PrefixLength: prefixLength},
		limit: 8*prefixLength + 64,
		cache: make(map[uint64]route.Request),
		runs:  make(map[uint64]blockRun),
	}
}

// key returns the routing request of r.
func (k *keyer) key(r *Request) (route.Request, error) {
	id := k.cacheID(r)
	if rr, ok := k.cache[id]; ok {
		return rr, nil
	}
	k.body = k.appendBody(k.body[:0], r)
	var ri normalize.RouteInfo
	var err error
	k.dst, ri, err = normalize.Normalize(k.dst[:0], k.body, normalize.Options{}, k.opts)
	if err != nil {
		return route.Request{}, fmt.Errorf("sim: keying request: %w", err)
	}
	rr := route.Request{Key: ri.Key, SpillKeys: ri.SpillKeys}
	k.cache[id] = rr
	return rr, nil
}

// keyed is the part of a chat the key reads: every message but the last,
// or the only one.
func keyed(msgs []Message) []Message {
	if len(msgs) > 1 {
		return msgs[:len(msgs)-1]
	}
	return msgs
}

func (k *keyer) cacheID(r *Request) uint64 {
	b := make([]byte, 0, 256)
	b = append(b, r.Group...)
	b = append(b, 0)
	addSegs := func(segs []Segment, budget int) int {
		for _, s := range segs {
			if budget <= 0 {
				break
			}
			n := min(s.Tokens, budget/charsPerTok+1)
			b = binary.LittleEndian.AppendUint64(b, s.ID)
			b = binary.LittleEndian.AppendUint32(b, uint32(n))
			budget -= n * charsPerTok
		}
		return budget
	}
	if r.Messages == nil {
		b = append(b, 'p')
		addSegs(r.Prompt, k.limit)
		return xxh3.Hash(b)
	}
	budget := k.limit
	for _, m := range keyed(r.Messages) {
		b = append(b, m.Role...)
		b = append(b, 0)
		budget = addSegs(m.Content, budget)
		b = append(b, 1)
	}
	if len(r.Messages) == 1 {
		b = append(b, 'o')
	}
	return xxh3.Hash(b)
}

func (k *keyer) appendBody(b []byte, r *Request) []byte {
	b = append(b, `{"model":"`+simModel+`"`...)
	if r.Group != "" {
		b = append(b, `,"prompt_cache_key":"`...)
		b = append(b, r.Group...)
		b = append(b, '"')
	}
	if r.Messages == nil {
		b = append(b, `,"prompt":"`...)
		start := len(b)
		for _, s := range r.Prompt {
			b = appendSegText(b, s, start+k.limit)
		}
		return append(b, `"}`...)
	}
	b = append(b, `,"messages":[`...)
	used := 0
	for i, m := range r.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":"`...)
		b = append(b, m.Role...)
		b = append(b, `","content":"`...)
		start := len(b)
		lim := k.limit - used
		if i == len(r.Messages)-1 && i > 0 {
			lim = 64 // the final message is not keyed
		}
		for _, s := range m.Content {
			b = appendSegText(b, s, start+max(lim, 0))
		}
		used += len(b) - start
		b = append(b, `"}`...)
	}
	return append(b, `]}`...)
}

// ChatText returns the request as chat messages with their text, for live
// load (package loadgen). A completion prompt becomes one user message.
func (r *Request) ChatText() (roles, texts []string) {
	if r.Messages == nil {
		return []string{"user"}, []string{segText(r.Prompt)}
	}
	for _, m := range r.Messages {
		roles = append(roles, m.Role)
		texts = append(texts, segText(m.Content))
	}
	return roles, texts
}
