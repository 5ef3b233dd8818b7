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
	fmt.Fprintf(w, "workload %s: %d requests over %.0f virtual s, %d replicas%s%s\n", r.Workload, r.Requests, r.VirtualSeconds, r.Replicas, routers, chain)
	if r.Note != "" {
		fmt.Fprintf(w, "  %s\n", r.Note)
	}
	fmt.Fprintf(w, "pooled-cache bound: hit rate %.1f%%\n\n", 100*r.PooledBoundHit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\thit\tTTFT p50 ms\tp90 ms\tp99 ms\treq/s\tmax share×n\tspill\tover bound\tkeys moved\tqueued\tfailed\t")
	for _, p := range r.Policies {
		moved := "-"
		if p.KeysMovedFraction != nil {
			moved = fmt.Sprintf("%.3f", *p.KeysMovedFraction)
		}
		fmt.Fprintf(tw, "%s\t%.1f%%\t%.0f\t%.0f\t%.0f\t%.2f\t%.3f\t%.1f%%\t%d\t%s\t%d\t%d\t\n",
			p.Name, 100*p.HitRate, p.TTFT.P50, p.TTFT.P90, p.TTFT.P99, p.Throughput, p.MaxShareRatio,
			100*p.SpillRate, p.MaxInflightOverBound, moved, p.Queued, p.Failed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.ScaleLabels) > 0 {
		fmt.Fprintf(w, "\nscale events: %s\n", strings.Join(r.ScaleLabels, ", "))
	}
	return nil
}
