package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// writeFlowControl writes the flow-control variants: per variant its
// throughput and hit rate, one row per flow, and the fairness figures of
// each band with several flows.
func (r *Report) writeFlowControl(w io.Writer) error {
	sched := r.EngineScheduling
	if sched == "" {
		sched = "fcfs"
	}
	fmt.Fprintf(w, "\nflow control (default routing policy %s; replicas schedule %s; served = prompt tokens × %g + output tokens, by the last arrival):\n", r.DefaultPolicy, sched, flowPromptWeight)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\trole\tout tok/s\thit\tflow\tprio\trequests\tshed\tTTFT p50 ms\tp90 ms\tp99 ms\tserved\tdemand\t")
	for _, v := range r.FlowControl {
		for i, f := range v.Flows {
			head := "\t\t\t"
			if i == 0 {
				head = fmt.Sprintf("%s\t%s\t%.0f\t%.1f%%", v.Name, v.Role, v.OutputTokensPerSec, 100*v.HitRate)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n",
				head, f.FairnessID, f.Priority, f.Requests, f.Shed, f.P50, f.P90, f.P99, f.ServedTokens, f.DemandTokens)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.writeFairness(w)
}

// writeFairness writes, for every band with several flows, each variant's
// Jain index over served / min(demand, max-min fair share) and the
// largest flow's served tokens over its equal share.
func (r *Report) writeFairness(w io.Writer) error {
	for _, p := range multiFlowBands(r.FlowControl) {
		fmt.Fprintf(w, "\nfairness in band %d (Jain's index over served / min(demand, max-min fair share); the biggest flow's served / equal share):\n", p)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "variant\tJain\tbiggest flow\tserved / equal share\t")
		for _, v := range r.FlowControl {
			_, jain, equal := BandFairness(v.Flows, p)
			big := biggestFlow(v.Flows, p)
			ratio := 0.0
			if equal > 0 {
				ratio = big.ServedTokens / equal
			}
			fmt.Fprintf(tw, "%s\t%.3f\t%s\t%.2f\t\n", v.Name, jain, big.FairnessID, ratio)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// multiFlowBands lists the priorities that hold more than one flow.
func multiFlowBands(vs []FlowVariant) []int {
	if len(vs) == 0 {
		return nil
	}
	count := map[int]int{}
	var out []int
	for _, f := range vs[0].Flows {
		if count[f.Priority]++; count[f.Priority] == 2 {
			out = append(out, f.Priority)
		}
	}
	return out
}

// biggestFlow is the flow of band priority with the most demand.
func biggestFlow(flows []FlowResult, priority int) FlowResult {
	var big FlowResult
	for _, f := range flows {
		if f.Priority == priority && f.DemandTokens > big.DemandTokens {
			big = f
		}
	}
	return big
}
