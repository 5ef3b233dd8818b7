package sim

import (
	"errors"
	"time"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
)

// prefixgateGate is what serve does by default, on package flowcontrol:
// a request goes on at once while the queue is empty and some replica is
// free (flowcontrol.Judge on prefixgate's in-flight count and the
// engine's scraped waiting requests and KV use) and has headroom for its
// band; otherwise it waits in the flow-control queue (strict priority
// across bands, virtual token counters across flows, FCFS within a flow)
// or, sheddable, is refused. Whenever an engine event may have freed a
// replica, the queue's head goes on while a replica is free; the replica
// is picked then, by the default routing policy. Priorities reach the
// engines in vLLM's field when they schedule by priority.
type prefixgateGate struct {
	gateLog
	q     *flowcontrol.Queue
	th    flowcontrol.Thresholds
	hr    *flowcontrol.Headroom
	limit int

	scrapeAt time.Time
	scraped  bool
	waiting  []int
	kv       []float64
	freed    []int // requests finished on each replica since the scrape
}

// pgScrapeInterval is how often serve scrapes each replica's metrics.
const pgScrapeInterval = 2 * time.Second

// pgObjectives are the workload's bands as flow_control.objectives.
var pgObjectives = map[string]int{"interactive": PriorityInteractive, "standard": PriorityStandard, "batch": PriorityBatch}

func newPrefixgateGate(f *fleet) (flowGate, error) {
	pol, err := flowcontrol.NewPolicy(flowcontrol.Config{Objectives: pgObjectives})
	if err != nil {
		return nil, err
	}
	hr, err := flowcontrol.NewHeadroom(flowcontrol.HeadroomConfig{})
	if err != nil {
		return nil, err
	}
	return &prefixgateGate{gateLog: newGateLog(f), q: flowcontrol.NewQueue(pol), th: flowcontrol.DefaultThresholds(), hr: hr, limit: f.opts.Threshold}, nil
}

func flowOf(fl *flight) flowcontrol.Flow {
	return flowcontrol.Flow{FairnessID: fl.req.Flow, Priority: fl.req.Priority}
}

func (g *prefixgateGate) arrive(fl *flight, now time.Time) {
	g.at(now)
	flow := flowOf(fl)
	g.hr.Saw(flow.Priority, now)
	if g.q.Len() == 0 && g.canTake(flow.Priority, now) {
		g.q.Charge(flow, fl.req.est, 0)
		g.f.route(fl, now)
		return
	}
	it := &flowcontrol.Item{Flow: flow, PromptTokens: fl.req.est, Bytes: int64(fl.req.est) * charsPerTok, Value: fl}
	if err := g.q.Push(it, now); err != nil {
		if !errors.Is(err, flowcontrol.ErrShed) {
			panic(err) // a fresh item is never queued twice
		}
		g.shed(fl, now)
	}
}

// canTake reports whether some replica is free for a request of band
// priority at now.
func (g *prefixgateGate) canTake(priority int, now time.Time) bool {
	g.scrape(now)
	for _, a := range g.f.active {
		m := flowcontrol.Member{
			InFlight: g.f.inflight[a], Limit: g.limit,
			Engine: flowcontrol.Engine{Known: true, Age: now.Sub(g.scrapeAt), Waiting: g.waiting[a], KVUtil: g.kv[a], Freed: g.freed[a]},
		}
		if flowcontrol.Judge(m, g.th) == flowcontrol.Free && g.hr.Admits(priority, m.InFlight, m.Limit, now) {
			return true
		}
	}
	return false
}

// scrape reads every replica's metrics if pgScrapeInterval has passed.
func (g *prefixgateGate) scrape(now time.Time) {
	if g.scraped && now.Sub(g.scrapeAt) < pgScrapeInterval && len(g.waiting) == len(g.f.reps) {
		return
	}
	g.scraped, g.scrapeAt = true, now
	g.waiting, g.kv, g.freed = g.waiting[:0], g.kv[:0], g.freed[:0]
	for _, r := range g.f.reps {
		st := r.eng.Stats()
		g.waiting = append(g.waiting, st.Waiting)
		g.kv = append(g.kv, st.KVCacheUsage)
		g.freed = append(g.freed, 0)
	}
}

func (g *prefixgateGate) wake(now time.Time) {
	g.at(now)
	g.q.Expire(now, func(it *flowcontrol.Item) { g.shed(it.Value.(*flight), now) })
	for {
		it := g.q.Peek()
		if it == nil || !g.canTake(it.Flow.Priority, now) {
			return
		}
		g.q.Pop()
		g.f.route(it.Value.(*flight), now)
	}
}

func (g *prefixgateGate) next() (time.Time, bool) {
	if g.q.Len() == 0 {
		return time.Time{}, false
	}
	t := g.scrapeAt.Add(pgScrapeInterval)
	if e, ok := g.q.NextExpiry(); ok && e.Before(t) {
		t = e
	}
	return g.later(t), true
}

func (g *prefixgateGate) timer(now time.Time) { g.wake(now) }

func (g *prefixgateGate) finished(fl *flight, at time.Time, out int) {
	g.gateLog.finished(fl, at, out)
	g.q.Charge(flowOf(fl), 0, out)
	if fl.replica < len(g.freed) {
		g.freed[fl.replica]++
	}
}
