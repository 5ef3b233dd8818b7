package sim

import (
	"slices"
	"time"
)

// gieGate is the Gateway API Inference Extension's flow control with its
// defaults (kubernetes-sigs/gateway-api-inference-extension,
// pkg/epp/flowcontrol and the utilization saturation detector in
// pkg/epp/saturationdetector):
//
//   - bands by priority, dispatched in strict order, highest first;
//   - within a band the "global strict" inter-flow policy (BestHead: the
//     flow whose head request is best by the intra-flow order) over FCFS
//     flows, which serves the band in arrival order;
//   - before each dispatch the saturation detector judges the pool: the
//     mean over replicas of max(waiting / 5, KV use / 0.8), metrics older
//     than 200 ms counting 1, refreshed every 50 ms; at 1 or more the
//     cycle stops (head-of-line blocking) until the next refresh or event;
//   - a sheddable request (priority < 0) is refused while the pool is
//     saturated; others wait with no TTL (the default) and no cap reached
//     in this workload;
//   - the engines get no priority.
type gieGate struct {
	gateLog
	bands   map[int][]*flight
	prios   []int // bands with requests, highest first
	queued  int
	readAt  time.Time
	read    bool
	satured float64
}

// GIE flow-control defaults.
const (
	gieQueueDepth = 5
	gieKVUtil     = 0.8
)

func newGIEGate(f *fleet) (flowGate, error) {
	return &gieGate{gateLog: newGateLog(f), bands: map[int][]*flight{}}, nil
}

// saturation is the detector's reading at now, refreshed every gieRefresh.
func (g *gieGate) saturation(now time.Time) float64 {
	if g.read && now.Sub(g.readAt) < gieRefresh {
		return g.satured
	}
	g.read, g.readAt = true, now
	sum := 0.0
	for _, a := range g.f.active {
		st := g.f.reps[a].eng.Stats()
		sum += max(float64(st.Waiting)/gieQueueDepth, st.KVCacheUsage/gieKVUtil)
	}
	g.satured = 1
	if len(g.f.active) > 0 {
		g.satured = sum / float64(len(g.f.active))
	}
	return g.satured
}

func (g *gieGate) arrive(fl *flight, now time.Time) {
	g.at(now)
	p := fl.req.Priority
	if p < 0 && g.saturation(now) >= 1 {
		g.shed(fl, now)
		return
	}
	if len(g.bands[p]) == 0 && !slices.Contains(g.prios, p) {
		i, _ := slices.BinarySearchFunc(g.prios, p, func(a, b int) int { return b - a })
		g.prios = slices.Insert(g.prios, i, p)
	}
	g.bands[p] = append(g.bands[p], fl)
	g.queued++
	g.cycle(now)
	if q := g.bands[p]; len(q) > 0 && q[len(q)-1] == fl {
		g.l.held++ // still queued after the cycle: it waits
	}
}

// cycle dispatches band heads, highest band first, while the pool is not
// saturated.
func (g *gieGate) cycle(now time.Time) {
	g.at(now)
	for len(g.prios) > 0 && g.saturation(now) < 1 {
		p := g.prios[0]
		q := g.bands[p]
		fl := q[0]
		q[0] = nil
		g.bands[p] = q[1:]
		if len(g.bands[p]) == 0 {
			delete(g.bands, p)
			g.prios = g.prios[1:]
		}
		g.queued--
		g.f.route(fl, now)
	}
}

func (g *gieGate) wake(now time.Time) { g.cycle(now) }

func (g *gieGate) next() (time.Time, bool) {
	if g.queued == 0 {
		return time.Time{}, false
	}
	return g.later(g.readAt.Add(gieRefresh)), true
}

func (g *gieGate) timer(now time.Time) { g.cycle(now) }
