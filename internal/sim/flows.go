package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// Flow control in the simulator: a workload whose requests carry a
// fairness id and a priority (Request.Flow, Request.Priority) is run once
// per flow-control variant (FlowVariants), each with the default routing
// policy on the same arrivals, and the report gains a FlowControl entry per
// variant with per-flow figures.

// Flow-control variants, in report order.
const (
	VariantPrefixgate = "prefixgate"
	VariantFCFS       = "fcfs"
	VariantGIE        = "gie-flow-control"
	VariantSMG        = "smg-priority"
)

// FlowVariants are the flow-control variants a workload with flows runs.
var FlowVariants = []string{VariantPrefixgate, VariantFCFS, VariantGIE, VariantSMG}

// variantRole is each variant's report role: prefixgate's is what serve
// does; the others are references.
func variantRole(name string) string {
	if name == VariantPrefixgate {
		return RoleRoute
	}
	return RolePeer
}

// flowPromptWeight is what a prompt token counts in served and demand
// tokens, an output token counting 1: flow control's default
// (flowcontrol.DefaultPromptWght), so the figures are in the unit its
// fairness works in.
const flowPromptWeight = 0.5

// FlowVariant is one variant's outcome: the --json flow_control entries.
type FlowVariant struct {
	Name               string       `json:"name"`
	Role               string       `json:"role"`
	OutputTokensPerSec float64      `json:"output_tokens_per_s"`
	HitRate            float64      `json:"hit_rate"`
	Flows              []FlowResult `json:"flows"`
	// Preempted counts requests the engines preempted and recomputed
	// (vllmsim's priority scheduling); Held the requests the variant made
	// wait; Replicas each request's replica (-1: none), by workload index;
	// TTFTs each request's TTFT in ms (NaN: none). Not in the JSON.
	Preempted uint64    `json:"-"`
	Held      int       `json:"-"`
	Replicas  []int     `json:"-"`
	TTFTs     []float64 `json:"-"`
}

// FlowResult is one flow's outcome under a variant.
type FlowResult struct {
	FairnessID string `json:"fairness_id"`
	Priority   int    `json:"priority"`
	// Requests is the flow's requests in the workload; Shed those refused
	// (429, a queue timeout, or preempted before their first token).
	Requests int `json:"requests"`
	Shed     int `json:"shed"`
	// TTFT percentiles over the requests served, ms.
	P50 float64 `json:"ttft_p50_ms"`
	P90 float64 `json:"ttft_p90_ms"`
	P99 float64 `json:"ttft_p99_ms"`
	// ServedTokens is the work done for the flow by the last arrival of
	// the workload (prompt tokens × 0.5 of requests whose first token came
	// by then, plus output tokens of those finished by then);
	// DemandTokens the same count over all its requests.
	ServedTokens float64 `json:"served_tokens"`
	DemandTokens float64 `json:"demand_tokens"`
}

// hasFlows reports whether any request of w carries a fairness id.
func hasFlows(w *Workload) bool {
	for _, r := range w.Requests {
		if r.Flow != "" {
			return true
		}
	}
	return false
}

// applyFlowOptions applies --flows and --engine-scheduling to w.
func applyFlowOptions(w *Workload, opts Options) error {
	switch opts.EngineScheduling {
	case "":
	case vllmsim.SchedulingFCFS, vllmsim.SchedulingPriority:
		w.Engine.SchedulingPolicy = opts.EngineScheduling
	default:
		return fmt.Errorf("sim: --engine-scheduling %q is not %s or %s", opts.EngineScheduling, vllmsim.SchedulingFCFS, vllmsim.SchedulingPriority)
	}
	if len(opts.Flows) == 0 {
		return nil
	}
	have := flowIDs(w)
	if len(have) == 0 {
		return fmt.Errorf("sim: --flows: workload %s has no flows", w.Name)
	}
	keep := map[string]bool{}
	for _, id := range opts.Flows {
		if !slices.Contains(have, id) {
			return fmt.Errorf("sim: --flows: no flow %q in workload %s (have %s)", id, w.Name, strings.Join(have, ", "))
		}
		keep[id] = true
	}
	kept := w.Requests[:0]
	for _, r := range w.Requests {
		if keep[r.Flow] {
			kept = append(kept, r)
		}
	}
	clear(w.Requests[len(kept):])
	w.Requests = kept
	return nil
}

// flowIDs lists the fairness ids of w, sorted.
func flowIDs(w *Workload) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range w.Requests {
		if r.Flow != "" && !seen[r.Flow] {
			seen[r.Flow] = true
			out = append(out, r.Flow)
		}
	}
	sort.Strings(out)
	return out
}

// flowLog records what happened to each request of a variant's run, by
// workload index.
type flowLog struct {
	first, finish []time.Duration // -1 until it happens
	shed          []bool
	held          int   // requests the gate made wait
	replica       []int // -1 until placed
}

func newFlowLog(n int) *flowLog {
	l := &flowLog{first: make([]time.Duration, n), finish: make([]time.Duration, n), shed: make([]bool, n), replica: make([]int, n)}
	for i := range n {
		l.first[i], l.finish[i], l.replica[i] = -1, -1, -1
	}
	return l
}

// flowResults summarizes the log per flow, ordered by priority (highest
// first) and then fairness id.
func (l *flowLog) flowResults(w *Workload, ttfts []float64) []FlowResult {
	end := w.Requests[len(w.Requests)-1].At
	idx := map[string]int{}
	var out []FlowResult
	var lat [][]float64
	for i, r := range w.Requests {
		k, ok := idx[r.Flow]
		if !ok {
			k = len(out)
			idx[r.Flow] = k
			out = append(out, FlowResult{FairnessID: r.Flow, Priority: r.Priority})
			lat = append(lat, nil)
		}
		fr := &out[k]
		fr.Requests++
		prompt := flowPromptWeight * float64(r.PromptTokens())
		fr.DemandTokens += prompt + float64(r.Output)
		if l.shed[i] {
			fr.Shed++
			continue
		}
		if l.first[i] >= 0 && l.first[i] <= end {
			fr.ServedTokens += prompt
		}
		if l.finish[i] >= 0 && l.finish[i] <= end {
			fr.ServedTokens += float64(r.Output)
		}
		if !math.IsNaN(ttfts[i]) {
			lat[k] = append(lat[k], ttfts[i])
		}
	}
	for k := range out {
		sort.Float64s(lat[k])
		out[k].P50, out[k].P90, out[k].P99 = quantile(lat[k], 0.5), quantile(lat[k], 0.9), quantile(lat[k], 0.99)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].FairnessID < out[j].FairnessID
	})
	return out
}

// JainIndex is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all
// are equal; 0 for no values.
func JainIndex(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if len(xs) == 0 || s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

// FairShares are the max-min fair shares of capacity among demands
// (water-filling): a flow asking less than an equal split gets what it
// asks, the rest split what is left equally.
func FairShares(demand []float64, capacity float64) []float64 {
	share := make([]float64, len(demand))
	left := capacity
	open := make([]int, 0, len(demand))
	for i := range demand {
		open = append(open, i)
	}
	for len(open) > 0 && left > 0 {
		each := left / float64(len(open))
		next := open[:0:0]
		for _, i := range open {
			if demand[i]-share[i] <= each {
				left -= demand[i] - share[i]
				share[i] = demand[i]
			} else {
				next = append(next, i)
			}
		}
		if len(next) == len(open) {
			for _, i := range next {
				share[i] += each
			}
			break
		}
		open = next
	}
	return share
}

// BandFairness is a band's fairness figures under a variant: each flow's
// served tokens divided by min(its demand, its max-min fair share of what
// the band was served), Jain's index over those, and each flow's equal
// share (the band's served tokens / its flows: what it would get if every
// flow of the band were backlogged).
func BandFairness(flows []FlowResult, priority int) (ratios []float64, jain float64, equal float64) {
	var demand, served []float64
	total := 0.0
	for _, f := range flows {
		if f.Priority != priority {
			continue
		}
		demand = append(demand, f.DemandTokens)
		served = append(served, f.ServedTokens)
		total += f.ServedTokens
	}
	if len(served) == 0 {
		return nil, 0, 0
	}
	fair := FairShares(demand, total)
	for i := range served {
		d := min(demand[i], fair[i])
		r := 0.0
		if d > 0 {
			r = served[i] / d
		}
		ratios = append(ratios, r)
	}
	return ratios, JainIndex(ratios), total / float64(len(served))
}
