package sim

import (
	"fmt"
	"slices"
	"time"
)

// Shared-prefix calibration, after llm-d's prefix-routing benchmark: 150
// groups of 5 users; every request is its group's 6,000-token prompt plus one
// of the group's 5 fixed 1,200-token questions, answered in 1,000 tokens. The
// replicas keep llama-3.1-70b-8xh100 timing with 24,000 KV blocks each (about
// an H100 serving a 32B model): the 150 group prompts (56,250 blocks) fit in
// the fleet's 168,000 blocks only if each replica keeps its own share, so a
// cache-blind router recomputes most prompts. At the base rate (7 req/s over
// 7 replicas) random routing keeps prefill about half busy; 1,000-token
// answers hold KV blocks for about 15 s, so above about 3× the base rate the
// replicas run out of blocks whatever the routing and queues grow.
const (
	spGroups      = 150
	spUsers       = 5
	spPrefix      = 6000
	spQuestion    = 1200
	spOutput      = 1000
	spCacheBlocks = 24000
	spRate        = 7.0
)

// Multi-turn calibration: ShareGPT-like chat sessions replayed in order.
// A session starts as a Poisson process; it has 2-12 turns; its first user
// turn is short (20-120 tokens), later ones 20-300 tokens; answers are 50-600
// tokens and are carried into the next turn as the assistant message; the
// user thinks for an exponential 6 s (mean) after the answer arrives. 8
// system prompts of 100 tokens are shared across sessions.
const (
	mtSessionRate = 3.0 // sessions per second over 7 replicas
	mtMinTurns    = 2
	mtMaxTurns    = 12
	mtThink       = 6.0
	mtCacheBlocks = 12000
	// mtAnswerGuess is the per-output-token time used only for a turn's
	// nominal arrival (the pooled bound and live load); the fleet simulation
	// sends the next turn after the answer really came back.
	mtAnswerGuess = 25 * time.Millisecond
)

func (g *gen) sharedPrefix(w *Workload, n int, x float64, seed uint64) {
	w.Engine.CacheBlocks = spCacheBlocks
	w.Note = fmt.Sprintf("llm-d shape: %d groups × %d users, %d-token group prompt + %d-token question, %d output tokens; Poisson %.0f req/s; %d KV blocks per replica",
		spGroups, spUsers, spPrefix, spQuestion, spOutput, spRate*x, spCacheBlocks)
	t := 0.0
	for range n {
		t += g.exp(1 / (spRate * x))
		grp, user := g.intn(spGroups), g.intn(spUsers)
		w.Requests = append(w.Requests, &Request{
			At: secs(t),
			Messages: []Message{
				{Role: "system", Content: []Segment{{ID: mix(uint64(grp) + 13<<40), Tokens: spPrefix}}},
				{Role: "user", Content: []Segment{{ID: mix(uint64(grp)<<8 + uint64(user) + 14<<40), Tokens: spQuestion}}},
			},
			Output: spOutput,
		})
	}
}

func (g *gen) multiTurn(w *Workload, n int, x float64, seed uint64) {
	w.Engine.CacheBlocks = mtCacheBlocks
	w.Note = fmt.Sprintf("chat sessions of %d-%d turns starting at %.1f/s; first user turn 20-120 tokens, later 20-300; answers 50-600 tokens carried into the next turn; think time %.0f s after each answer; %d KV blocks per replica",
		mtMinTurns, mtMaxTurns, mtSessionRate*x, mtThink, mtCacheBlocks)
	t := 0.0
	for s := 0; len(w.Requests) < n; s++ {
		t += g.exp(1 / (mtSessionRate * x))
		msgs := []Message{{Role: "system", Content: []Segment{{ID: mix(uint64(s%8) + 15<<40), Tokens: 100}}}}
		turns := mtMinTurns + g.intn(mtMaxTurns-mtMinTurns+1)
		at := secs(t)
		var prev *Request
		for k := range turns {
			u := 20 + g.intn(281)
			if k == 0 {
				u = 20 + g.intn(101)
			}
			msgs = append(msgs, Message{Role: "user", Content: []Segment{{ID: mix(uint64(s)<<8 + uint64(k) + 16<<40 + seed<<20), Tokens: u}}})
			r := &Request{At: at, Messages: slices.Clone(msgs), Output: 50 + g.intn(551)}
			if prev != nil {
				r.Think = secs(g.exp(mtThink))
				r.follows = true
				prev.next = r
				r.At = prev.At + time.Duration(prev.Output)*mtAnswerGuess + r.Think
			}
			w.Requests = append(w.Requests, r)
			// The answer's text is a deterministic function of the session
			// and turn, so the next turn's prompt carries exactly the
			// tokens the replica generated (as far as the prefix cache can
			// tell: vllmsim caches prompt blocks only).
			msgs = append(msgs, Message{Role: "assistant", Content: []Segment{{ID: mix(uint64(s)<<8 + uint64(k) + 17<<40 + seed<<20), Tokens: r.Output}}})
			prev = r
			at = r.At
		}
	}
}
