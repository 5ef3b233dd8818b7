package sim

import (
	"fmt"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// The noisy-neighbor workload: a shared fleet of 8 replicas serving three
// priority bands, each flow a fairness id:
//
//   - interactive (priority 10): flow "chat", short chats arriving steadily
//     (Poisson): one of 8 shared 400-token system prompts, a 50-150 token
//     question, 40-120 output tokens;
//   - standard (priority 0): six tenants. Five light ones ("light-1" to
//     "light-5", Poisson each): the tenant's own 2,000-token system prompt,
//     a 100-300 token question, 100-300 output tokens. One heavy one
//     ("heavy", Poisson) that sends 10× a light tenant's tokens with long
//     prompts: a 6,000-10,000 token document of its own, 100-300 output
//     tokens;
//   - batch (priority -1, sheddable): flow "batch", long prompts in bursts:
//     bursts start as a Poisson process and release their requests evenly
//     over a few seconds; each is a 1,000-token shared instruction and a
//     3,000-5,000 token document, 200-400 output tokens.
//
// The replicas (llama-3.1-70b-8xh100) schedule by priority as vLLM does
// with --scheduling-policy priority. At rate 1 the total demand is 2× the
// fleet's sustainable rate under fcfs (the highest rate at which the
// default policy without flow control keeps TTFT p90 within the 2 s SLO;
// docs/simulation.md has the sweep).
const (
	nnReplicas     = 8
	nnChatRate     = 16.0 // req/s
	nnLightRate    = 6.5  // req/s per light tenant
	nnLights       = 5
	nnHeavyRate    = nnLightRate * 10 * nnLightTokens / nnHeavyTokens
	nnLightTokens  = 2000 + 200 + 200 // mean prompt + output of a light request
	nnHeavyTokens  = 8000 + 200       // the same for the heavy tenant
	nnBatchEvery   = 6.0              // mean seconds between bursts
	nnBatchBurst   = 40               // requests per burst
	nnBatchSpread  = 2.0              // seconds a burst's requests arrive over
	nnChatSystem   = 400
	nnChatPrompts  = 8
	nnLightSystem  = 2000
	nnBatchPreface = 1000
)

// Priorities of the noisy-neighbor bands.
const (
	PriorityInteractive = 10
	PriorityStandard    = 0
	PriorityBatch       = -1
)

// noisyNeighbor generates n requests of the noisy-neighbor workload at x
// times its base rate.
func (g *gen) noisyNeighbor(w *Workload, n int, x float64, seed uint64) {
	w.Replicas = nnReplicas
	w.Engine.SchedulingPolicy = vllmsim.SchedulingPriority
	w.Note = fmt.Sprintf("bands interactive (p10: chat %.0f req/s), standard (p0: %d light tenants at %.1f req/s, one heavy at %.2f req/s with 6,000-10,000 token documents, 10× a light tenant's tokens), batch (p-1: bursts of %d long prompts every %.0f s on average); replicas schedule by priority",
		nnChatRate*x, nnLights, nnLightRate*x, nnHeavyRate*x, nnBatchBurst, nnBatchEvery/x)
	// Each stream is generated far enough to hold its share of n; the
	// merged stream is then cut at n by arrival.
	span := float64(n) / (x * (nnChatRate + nnLights*nnLightRate + nnHeavyRate + nnBatchBurst/nnBatchEvery))
	horizon := 1.5*span + 2*nnBatchEvery/x
	g.chatStream(w, x, horizon, seed)
	for i := 1; i <= nnLights; i++ {
		g.lightStream(w, i, x, horizon, seed)
	}
	g.heavyStream(w, x, horizon, seed)
	g.batchStream(w, x, horizon, seed)
}

func (g *gen) chatStream(w *Workload, x, horizon float64, seed uint64) {
	for t, i := g.exp(1/(nnChatRate*x)), 0; t < horizon; t, i = t+g.exp(1/(nnChatRate*x)), i+1 {
		w.Requests = append(w.Requests, &Request{
			At: secs(t), Flow: "chat", Priority: PriorityInteractive,
			Messages: []Message{
				{Role: "system", Content: []Segment{{ID: mix(uint64(g.intn(nnChatPrompts)) + 20<<40), Tokens: nnChatSystem}}},
				{Role: "user", Content: []Segment{{ID: mix(uint64(i) + 21<<40 + seed<<20), Tokens: 50 + g.intn(101)}}},
			},
			Output: 40 + g.intn(81),
		})
	}
}

func (g *gen) lightStream(w *Workload, tenant int, x, horizon float64, seed uint64) {
	flow := fmt.Sprintf("light-%d", tenant)
	for t, i := g.exp(1/(nnLightRate*x)), 0; t < horizon; t, i = t+g.exp(1/(nnLightRate*x)), i+1 {
		w.Requests = append(w.Requests, &Request{
			At: secs(t), Flow: flow, Priority: PriorityStandard,
			Messages: []Message{
				{Role: "system", Content: []Segment{{ID: mix(uint64(tenant) + 22<<40), Tokens: nnLightSystem}}},
				{Role: "user", Content: []Segment{{ID: mix(uint64(tenant)<<32 + uint64(i) + 23<<40 + seed<<20), Tokens: 100 + g.intn(201)}}},
			},
			Output: 100 + g.intn(201),
		})
	}
}

func (g *gen) heavyStream(w *Workload, x, horizon float64, seed uint64) {
	for t, i := g.exp(1/(nnHeavyRate*x)), 0; t < horizon; t, i = t+g.exp(1/(nnHeavyRate*x)), i+1 {
		w.Requests = append(w.Requests, &Request{
			At: secs(t), Flow: "heavy", Priority: PriorityStandard,
			Messages: []Message{
				{Role: "user", Content: []Segment{{ID: mix(uint64(i) + 24<<40 + seed<<20), Tokens: 6000 + g.intn(4001)}}},
			},
			Output: 100 + g.intn(201),
		})
	}
}

func (g *gen) batchStream(w *Workload, x, horizon float64, seed uint64) {
	i := 0
	for t := g.exp(nnBatchEvery / x); t < horizon; t += g.exp(nnBatchEvery / x) {
		for k := range nnBatchBurst {
			at := t + nnBatchSpread*float64(k)/nnBatchBurst
			w.Requests = append(w.Requests, &Request{
				At: secs(at), Flow: "batch", Priority: PriorityBatch,
				Messages: []Message{
					{Role: "system", Content: []Segment{{ID: mix(25 << 40), Tokens: nnBatchPreface}}},
					{Role: "user", Content: []Segment{{ID: mix(uint64(i) + 26<<40 + seed<<20), Tokens: 3000 + g.intn(2001)}}},
				},
				Output: 200 + g.intn(201),
			})
			i++
		}
	}
}

// nnBands names the noisy-neighbor bands by priority, for reports.
var nnBands = map[int]string{PriorityInteractive: "interactive", PriorityStandard: "standard", PriorityBatch: "batch"}
