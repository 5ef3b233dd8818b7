package sim

import (
	"fmt"
	"math"
	"slices"
)

// DefaultSweepRequests is the request count of each rate of a sweep when
// Options.Requests is 0: fewer than a single run's, because a sweep runs the
// whole comparison once per rate and, past saturation, every request waits
// longer than the last (open-loop arrivals), so the count bounds both the
// time and the memory of the overloaded points.
const DefaultSweepRequests = 10000

// SweepPoint is the comparison at one rate multiplier.
type SweepPoint struct {
	Rate           float64        `json:"rate"`
	Requests       int            `json:"requests"`
	VirtualSeconds float64        `json:"virtual_s"`
	PooledBoundHit float64        `json:"pooled_bound_hit_rate"`
	Policies       []PolicyResult `json:"policies"`
}

// RunSweep runs the comparison at every rate of opts.Rates (multipliers of
// the workload's arrival rate). The returned report's top-level fields are
// the lowest rate's run; Sweep holds every rate's and SustainableRate each
// policy's highest rate whose TTFT p90 is within the SLO.
func RunSweep(opts Options) (*Report, error) {
	rates := slices.Clone(opts.Rates)
	slices.Sort(rates)
	rates = slices.Compact(rates)
	if len(rates) == 0 {
		return nil, fmt.Errorf("sim: --rates is empty")
	}
	if len(rates) > 32 {
		return nil, fmt.Errorf("sim: --rates has %d rates, at most 32", len(rates))
	}
	for _, r := range rates {
		if !(r > 0) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("sim: --rates: %v is not a positive rate multiplier", r)
		}
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	n := opts.Requests
	if n == 0 && !isTrace(opts.Workload) {
		n = DefaultSweepRequests
	}
	outer := opts.Progress
	var top *Report
	var points []SweepPoint
	for i, x := range rates {
		o := opts
		o.Rates, o.Rate = nil, x
		if outer != nil {
			o.Progress = func(done, total int) { outer(i*total+done, total*len(rates)) }
		}
		w, err := BuildWorkloadRate(opts.Workload, n, opts.Seed, x)
		if err != nil {
			return nil, err
		}
		rep, err := Simulate(w, o)
		if err != nil {
			return nil, fmt.Errorf("rate %v: %w", x, err)
		}
		rep.Rate = x
		if top == nil {
			top = rep
		}
		points = append(points, SweepPoint{Rate: x, Requests: rep.Requests, VirtualSeconds: rep.VirtualSeconds,
			PooledBoundHit: rep.PooledBoundHit, Policies: rep.Policies})
	}
	top.Sweep = points
	top.SustainableRate = sustainable(points, top.SLO)
	return top, nil
}

// sustainable maps every policy to the highest swept rate whose TTFT p90 is
// within slo (milliseconds), or nil when no swept rate is.
func sustainable(points []SweepPoint, sloMS float64) map[string]*float64 {
	out := map[string]*float64{}
	for _, pt := range points {
		for _, p := range pt.Policies {
			if _, ok := out[p.Name]; !ok {
				out[p.Name] = nil
			}
			if p.TTFT.P90 <= sloMS && p.Failed == 0 {
				r := pt.Rate
				out[p.Name] = &r
			}
		}
	}
	return out
}
