package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes r as exactly one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteTable writes a human-readable comparison.
func (r *Report) WriteTable(w io.Writer) error {
	if r.PD != "" {
		return r.writePDTable(w)
	}
	routers := ""
	if r.Routers > 1 {
		routers = fmt.Sprintf(", %d routers", r.Routers)
	}
	if r.LoadHintInterval > 0 {
		routers += fmt.Sprintf(", load hints every %v", r.LoadHintInterval)
	}
	chain := ""
	if !r.SpillChain {
		chain = ", spill chain off"
	}
	rate := ""
	if r.Rate != 1 && r.Rate != 0 {
		rate = fmt.Sprintf(" at %g× the base rate", r.Rate)
	}
	fmt.Fprintf(w, "workload %s: %d requests over %.0f virtual s%s, %d replicas%s%s\n", r.Workload, r.Requests, r.VirtualSeconds, rate, r.Replicas, routers, chain)
	if r.Note != "" {
		fmt.Fprintf(w, "  %s\n", r.Note)
	}
	fmt.Fprintf(w, "pooled-cache bound: hit rate %.1f%%\n\n", 100*r.PooledBoundHit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trole\thit\tTTFT p50 ms\tp90 ms\tp99 ms\treq/s\tout tok/s\tgoodput\tmax share×n\tspill\tover bound\tkeys moved\tqueued\tfailed\t")
	for _, p := range r.Policies {
		moved := "-"
		if p.KeysMovedFraction != nil {
			moved = fmt.Sprintf("%.3f", *p.KeysMovedFraction)
		}
		name := p.Name
		if name == r.DefaultPolicy {
			name += " (default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%.0f\t%.0f\t%.0f\t%.2f\t%.0f\t%.1f%%\t%.3f\t%.1f%%\t%d\t%s\t%d\t%d\t\n",
			name, p.Role, 100*p.HitRate, p.TTFT.P50, p.TTFT.P90, p.TTFT.P99, p.Throughput, p.OutputTokensPerSec, 100*p.Goodput, p.MaxShareRatio,
			100*p.SpillRate, p.MaxInflightOverBound, moved, p.Queued, p.Failed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.FlowControl) > 0 {
		if err := r.writeFlowControl(w); err != nil {
			return err
		}
	}
	if len(r.Sweep) > 0 {
		if err := r.writeSweep(w); err != nil {
			return err
		}
	}
	if len(r.ScaleLabels) > 0 {
		fmt.Fprintf(w, "\nscale events: %s\n", strings.Join(r.ScaleLabels, ", "))
	}
	return nil
}

// writeSweep writes the rate sweep: one row per rate and policy, then each
// policy's sustainable rate.
func (r *Report) writeSweep(w io.Writer) error {
	fmt.Fprintf(w, "\nrate sweep (×base arrival rate; goodput = TTFT ≤ %.0f ms):\n", r.SLO)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate\tpolicy\thit\tTTFT p50 ms\tp90 ms\tp99 ms\treq/s\tout tok/s\tgoodput\t")
	for _, pt := range r.Sweep {
		for _, p := range pt.Policies {
			fmt.Fprintf(tw, "%g\t%s\t%.1f%%\t%.0f\t%.0f\t%.0f\t%.2f\t%.0f\t%.1f%%\t\n",
				pt.Rate, p.Name, 100*p.HitRate, p.TTFT.P50, p.TTFT.P90, p.TTFT.P99, p.Throughput, p.OutputTokensPerSec, 100*p.Goodput)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nsustainable rate (highest swept rate with TTFT p90 ≤ %.0f ms):", r.SLO)
	for _, p := range r.Sweep[0].Policies {
		v := "none"
		if x := r.SustainableRate[p.Name]; x != nil {
			v = fmt.Sprintf("%g", *x)
		}
		fmt.Fprintf(w, " %s %s;", p.Name, v)
	}
	fmt.Fprintln(w)
	return nil
}
