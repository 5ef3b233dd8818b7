package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// Workload is a generated or replayed request stream and the fleet it is
// meant for.
type Workload struct {
	Name     string
	Requests []*Request
	// Replicas is the default fleet size.
	Replicas int
	// Engine is each replica's engine model.
	Engine vllmsim.EngineConfig
	// Salted workloads send the group as cache_salt, so tenants never share
	// KV cache even for equal prompts.
	Salted bool
	// Note describes the calibration, for reports.
	Note string
	// Cores, when positive, is how many CPU cores the replicas share: while
	// more replicas than that compute at once, each runs at cores/busy of
	// its engine's speed (see cores.go). 0: every replica has its own.
	Cores float64
}

// Workloads lists the synthetic workload names; "trace:FILE" replays a file.
var Workloads = []string{"long-context", "sharegpt", "multitenant", "zipf", "agent", "shared-prefix", "multi-turn", "noisy-neighbor"}

// Long-context calibration (see docs/simulation.md): 84 distinct 8,000-token
// documents; each replica's KV cache (11,000 blocks) holds about 22 of them,
// a quarter, so a cache-blind policy hits about 25% of the time, as SageMaker
// measured, while a replica's share under prefix-aware routing (12 documents)
// fits with room for spilled ones. 12 req/s keeps random routing's prefill
// about 70% busy; outputs of 300-700 tokens keep about 13 requests in flight
// per replica.
const (
	lcDocs        = 84
	lcPrefix      = 8000
	lcCacheBlocks = 11000
	lcRate        = 12.0 // requests per second over 7 replicas
	lcOutMin      = 300
	lcOutSpan     = 400
)

// BuildWorkload generates n requests of a named synthetic workload, or
// replays "trace:FILE" (n <= 0 means the whole trace), at its base rate.
func BuildWorkload(name string, n int, seed uint64) (*Workload, error) {
	return BuildWorkloadRate(name, n, seed, 1)
}

// BuildWorkloadRate is BuildWorkload with every arrival process x times
// faster: independent requests and the starts of conversations, tasks and
// sessions arrive x times as often, while think times between the turns of
// one session stay as they are (a user does not read faster because there
// are more users). A trace's timestamps are divided by x.
func BuildWorkloadRate(name string, n int, seed uint64, x float64) (*Workload, error) {
	if !(x > 0) || math.IsInf(x, 0) {
		return nil, fmt.Errorf("sim: --rate %v must be a positive number", x)
	}
	if file, ok := strings.CutPrefix(name, "trace:"); ok {
		return loadTraceRate(file, n, x)
	}
	if n <= 0 {
		return nil, fmt.Errorf("sim: --requests must be positive, got %d", n)
	}
	g := &gen{rnd: seed*0x9e3779b97f4a7c15 + 1}
	preset, err := vllmsim.LookupPreset("llama-3.1-70b-8xh100")
	if err != nil {
		return nil, err
	}
	w := &Workload{Name: name, Replicas: 7, Engine: preset.Engine}
	switch name {
	case "long-context":
		g.longContext(w, n, x, seed)
	case "sharegpt":
		g.shareGPT(w, n, x, seed)
	case "multitenant":
		g.multitenant(w, n, x, seed)
	case "zipf":
		g.zipfDocuments(w, n, x, seed)
	case "agent":
		g.agent(w, n, x, seed)
	case "shared-prefix":
		g.sharedPrefix(w, n, x, seed)
	case "multi-turn":
		g.multiTurn(w, n, x, seed)
	case "noisy-neighbor":
		g.noisyNeighbor(w, n, x, seed)
	default:
		return nil, fmt.Errorf("sim: unknown workload %q (have %s, trace:FILE)", name, strings.Join(Workloads, ", "))
	}
	slices.SortStableFunc(w.Requests, func(a, b *Request) int { return int(a.At - b.At) })
	w.truncate(n)
	return w, nil
}

// loadTraceRate loads n requests of a trace (all if n <= 0) with its
// timestamps divided by x.
func loadTraceRate(file string, n int, x float64) (*Workload, error) {
	w, err := LoadTrace(file, n)
	if err != nil {
		return nil, err
	}
	if x != 1 {
		for _, r := range w.Requests {
			r.At = time.Duration(float64(r.At) / x)
		}
	}
	return w, nil
}

// truncate keeps the first n requests; a kept turn whose next turn was
// dropped ends its session.
func (w *Workload) truncate(n int) {
	if len(w.Requests) <= n {
		return
	}
	for _, r := range w.Requests[n:] {
		r.dropped = true
	}
	w.Requests = w.Requests[:n]
	for _, r := range w.Requests {
		if r.next != nil && r.next.dropped {
			r.next = nil
		}
	}
}

// longContext: documents of uniform popularity behind unique questions
// (see the calibration above).
func (g *gen) longContext(w *Workload, n int, x float64, seed uint64) {
	w.Engine.CacheBlocks = lcCacheBlocks
	w.Note = fmt.Sprintf("%d documents of %d tokens, uniform popularity; unique suffixes of 40-200 tokens; outputs 300-700 tokens; Poisson %.0f req/s; %d KV blocks per replica (about %d documents)",
		lcDocs, lcPrefix, lcRate, lcCacheBlocks, lcCacheBlocks*vllmsim.BlockSize/lcPrefix)
	t := 0.0
	for i := range n {
		t += g.exp(1 / (lcRate * x))
		doc := g.intn(lcDocs)
		w.Requests = append(w.Requests, &Request{
			At: secs(t),
			Messages: []Message{
				{Role: "system", Content: []Segment{{ID: mix(uint64(doc) + 1<<40), Tokens: lcPrefix}}},
				{Role: "user", Content: []Segment{{ID: mix(uint64(i) + 2<<40 + seed<<20), Tokens: 40 + g.intn(161)}}},
			},
			Output: lcOutMin + g.intn(lcOutSpan+1),
		})
	}
}

// shareGPT: short multi-turn chats: a few shared system prompts, turns of
// 20-200 tokens, answers of 50-400 tokens, think time ~10 s.
func (g *gen) shareGPT(w *Workload, n int, x float64, seed uint64) {
	w.Engine.CacheBlocks = 4000
	w.Note = "4 system prompts of 150 tokens; conversations of 1-6 turns, user turns 20-200 tokens, answers 50-400 tokens, think time 10 s; 4,000 KV blocks per replica"
	w.Requests = g.conversations(n, 12*x, func(conv int) []Message {
		return []Message{{Role: "system", Content: []Segment{{ID: mix(uint64(conv%4) + 3<<40), Tokens: 150}}}}
	}, 6, 20, 200, 50, 400, 10, seed)
}

// multitenant: 16 tenants share the same 2,000-token system prompt text;
// each tenant is a group with its own cache salt.
func (g *gen) multitenant(w *Workload, n int, x float64, seed uint64) {
	w.Salted = true
	w.Engine.CacheBlocks = 6000
	w.Note = "16 tenants (groups, cache-salted) with the same 2,000-token system prompt; 1-4 turns; 6,000 KV blocks per replica"
	reqs := g.conversations(n, 10*x, func(int) []Message {
		return []Message{{Role: "system", Content: []Segment{{ID: mix(4 << 40), Tokens: 2000}}}}
	}, 4, 20, 200, 50, 300, 8, seed)
	for _, r := range reqs {
		r.Group = fmt.Sprintf("tenant-%02d", g.intn(16))
	}
	// A conversation keeps its tenant.
	byConv := map[uint64]string{}
	for _, r := range reqs {
		c := r.Messages[1].Content[0].ID
		if t, ok := byConv[c]; ok {
			r.Group = t
		} else {
			byConv[c] = r.Group
		}
	}
	w.Requests = reqs
}

// zipfDocuments: hot prefixes, 200 documents of 3,000 tokens with Zipf(1.1)
// popularity.
func (g *gen) zipfDocuments(w *Workload, n int, x float64, seed uint64) {
	w.Engine.CacheBlocks = 8000
	w.Note = "200 documents of 3,000 tokens, Zipf s=1.1 popularity; unique suffixes; Poisson 14 req/s; 8,000 KV blocks per replica"
	z := newZipf(200, 1.1)
	t := 0.0
	for i := range n {
		t += g.exp(1 / (14.0 * x))
		doc := z.draw(g.float())
		w.Requests = append(w.Requests, &Request{
			At: secs(t),
			Messages: []Message{
				{Role: "system", Content: []Segment{{ID: mix(uint64(doc) + 5<<40), Tokens: 3000}}},
				{Role: "user", Content: []Segment{{ID: mix(uint64(i) + 6<<40 + seed<<20), Tokens: 40 + g.intn(161)}}},
			},
			Output: 50 + g.intn(151),
		})
	}
}

// agent: tool loops. 8 agent types with 1,500-token system prompts; a task
// runs 4-20 steps, each adding a tool call and a tool result, so the
// context grows; steps follow each other after 2-4 s.
func (g *gen) agent(w *Workload, n int, x float64, seed uint64) {
	w.Engine.CacheBlocks = 12000
	w.Note = "8 agent system prompts of 1,500 tokens; tasks of 4-20 steps, each adding a 30-80 token call and a 100-1,000 token tool result; 12,000 KV blocks per replica"
	t := 0.0
	for task := 0; len(w.Requests) < n; task++ {
		t += g.exp(1 / (1.2 * x))
		msgs := []Message{
			{Role: "system", Content: []Segment{{ID: mix(uint64(task%8) + 7<<40), Tokens: 1500}}},
			{Role: "user", Content: []Segment{{ID: mix(uint64(task) + 8<<40 + seed<<20), Tokens: 30 + g.intn(200)}}},
		}
		steps := 4 + g.intn(17)
		at := t
		for s := 0; s < steps && len(w.Requests) < n; s++ {
			w.Requests = append(w.Requests, &Request{At: secs(at), Messages: slices.Clone(msgs), Output: 30 + g.intn(51)})
			msgs = append(msgs,
				Message{Role: "assistant", Content: []Segment{{ID: mix(uint64(task)<<8 + uint64(s) + 9<<40 + seed<<20), Tokens: 30 + g.intn(51)}}},
				Message{Role: "tool", Content: []Segment{{ID: mix(uint64(task)<<8 + uint64(s) + 10<<40 + seed<<20), Tokens: 100 + g.intn(901)}}})
			at += 2 + 2*g.float()
		}
	}
}

// conversations generates multi-turn chats: conversations start as a
// Poisson process of rate per second; each turn is a request carrying the
// history.
func (g *gen) conversations(n int, rate float64, system func(conv int) []Message, maxTurns, uMin, uMax, aMin, aMax int, think float64, seed uint64) []*Request {
	var out []*Request
	t := 0.0
	for conv := 0; len(out) < n; conv++ {
		t += g.exp(1 / rate)
		msgs := system(conv)
		turns := 1 + g.intn(maxTurns)
		at := t
		for k := 0; k < turns; k++ {
			msgs = append(msgs, Message{Role: "user", Content: []Segment{{ID: mix(uint64(conv)<<8 + uint64(k) + 11<<40 + seed<<20), Tokens: uMin + g.intn(uMax-uMin+1)}}})
			out = append(out, &Request{At: secs(at), Messages: slices.Clone(msgs), Output: aMin + g.intn(aMax-aMin+1)})
			msgs = append(msgs, Message{Role: "assistant", Content: []Segment{{ID: mix(uint64(conv)<<8 + uint64(k) + 12<<40 + seed<<20), Tokens: out[len(out)-1].Output}}})
			at += g.exp(think)
		}
	}
	return out
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// gen is a deterministic random source (splitmix64).
type gen struct{ rnd uint64 }

func (g *gen) next() uint64 {
	g.rnd += 0x9e3779b97f4a7c15
	return mix(g.rnd)
}

func (g *gen) float() float64 { return float64(g.next()>>11) / (1 << 53) }

func (g *gen) intn(n int) int { return int(g.next() % uint64(n)) }

// exp draws an exponential variate with the given mean.
func (g *gen) exp(mean float64) float64 { return -mean * math.Log(1-g.float()) }

type zipf struct{ cdf []float64 }

func newZipf(n int, s float64) *zipf {
	z := &zipf{cdf: make([]float64, n)}
	sum := 0.0
	for i := range n {
		sum += 1 / math.Pow(float64(i+1), s)
		z.cdf[i] = sum
	}
	for i := range z.cdf {
		z.cdf[i] /= sum
	}
	return z
}

func (z *zipf) draw(u float64) int {
	i, _ := slices.BinarySearch(z.cdf, u)
	return min(i, len(z.cdf)-1)
}
