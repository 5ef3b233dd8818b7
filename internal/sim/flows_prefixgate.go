package sim

import (
	"errors"
	"time"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/route"
)

// prefixgateGate is serve's flow control, on package flowcontrol: a
// request goes on at once while the queue is empty and some replica is
// free for it — flowcontrol.Judge on prefixgate's in-flight count, its
// prefix index's queued prefill (prompt tokens it does not expect the
// replica to hold, of requests without a first token; route.Load) against
// pgTokenLimit, and the engine's scraped waiting requests and KV use —
// with headroom (flowcontrol.Headroom, in requests and in pending prefill)
// for the bands above that asked recently. Otherwise it waits in the
// flow-control queue (strict priority across bands, virtual token counters
// across flows, FCFS within a flow; a full band evicts its longest flow's
// newest request for a shorter flow's arrival). A sheddable request is refused at
// once only when the fleet is saturated — no replica free by the in-flight
// bound and the engines' signals; held back by the prefill budget alone it
// waits (Queue.Hold). Whenever an engine event may have freed a replica,
// the queue's head goes on while a replica is free for it; the replica is
// picked then, by the default routing policy. Priorities reach the engines
// in vLLM's field (lower first) when they schedule by priority.
type prefixgateGate struct {
	gateLog
	q  *flowcontrol.Queue
	th flowcontrol.Thresholds
	hr *flowcontrol.Headroom

	scrapeAt   time.Time
	scraped    bool
	waiting    []int
	kv         []float64
	freed      []int // requests finished on each replica since the scrape
	tokenLimit int
	rp         *routePicker // the router, whose loads flow control reads
}

// pgTokenLimit is Member.TokenLimit: the predicted pending prefill, in
// prompt tokens, at which a replica takes no more work. About two seconds
// of a noisy-neighbor replica's prefill (15,000 tokens/s): enough to keep
// it busy between engine events and to absorb the workload's bursts below
// saturation untouched, little enough that a short prompt shares the
// engine with few long ones.
const pgTokenLimit = 32768

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
	rp, ok := f.pickers[0].(*routePicker)
	if !ok || len(f.pickers) != 1 {
		return nil, errors.New("sim: the prefixgate flow-control variant needs one router of a route policy")
	}
	g := &prefixgateGate{gateLog: newGateLog(f), q: flowcontrol.NewQueue(pol), th: flowcontrol.DefaultThresholds(), hr: hr,
		tokenLimit: pgTokenLimit, rp: rp}
	g.q.OnEvict(func(it *flowcontrol.Item) { g.shed(it.Value.(*flight), g.now) })
	return g, nil
}

func flowOf(fl *flight) flowcontrol.Flow {
	return flowcontrol.Flow{FairnessID: fl.req.Flow, Priority: fl.req.Priority}
}

func (g *prefixgateGate) arrive(fl *flight, now time.Time) {
	g.at(now)
	flow := flowOf(fl)
	g.hr.Saw(flow.Priority, now)
	if g.q.Len() == 0 && g.canTake(flow.Priority, fl.req.est, now) {
		g.q.Charge(flow, fl.req.est, 0)
		g.f.route(fl, now)
		return
	}
	it := &flowcontrol.Item{Flow: flow, PromptTokens: fl.req.est, Bytes: int64(fl.req.est) * charsPerTok, Value: fl}
	push := g.q.Hold // paced, not saturated: every band waits
	if g.saturated(now) {
		push = g.q.Push // saturated: sheddable requests are refused
	}
	g.l.held++
	if err := push(it, now); err != nil {
		if !errors.Is(err, flowcontrol.ErrShed) {
			panic(err) // a fresh item is never queued twice
		}
		g.shed(fl, now)
	}
}

// canTake reports whether some replica is free at now for a request of
// band priority with the given prompt tokens: flowcontrol.Judge finds it
// free, and the headroom of the bands above leaves room for it both in
// requests and in pending prefill (an idle replica takes any prompt).
func (g *prefixgateGate) canTake(priority, tokens int, now time.Time) bool {
	ok := false
	g.each(now, func(m flowcontrol.Member) bool {
		ok = flowcontrol.Judge(m, g.th) == flowcontrol.Free && g.hr.Admits(priority, m.InFlight, m.Limit, now) &&
			g.paced(m.QueuedTokens, tokens, priority, now)
		return !ok
	})
	return ok
}

// each calls fn with every candidate as flow control sees it — the
// router's load (route.Router.EachLoad: in-flight count, threshold, the
// prefix index's queued prefill) and the engine's last scrape — until fn
// returns false.
func (g *prefixgateGate) each(now time.Time, fn func(flowcontrol.Member) bool) {
	g.scrape(now)
	g.rp.r.EachLoad("", func(l route.Load) bool {
		a := g.rp.idx[l.Member.ID()]
		return fn(flowcontrol.Member{
			InFlight: l.Hinted, Limit: l.Threshold, QueuedTokens: l.QueuedTokens, TokenLimit: g.tokenLimit,
			Engine: flowcontrol.Engine{Known: true, Age: now.Sub(g.scrapeAt), Waiting: g.waiting[a], KVUtil: g.kv[a], Freed: g.freed[a]},
		})
	})
}

// paced reports whether a replica with pending predicted prefill may take
// a request of band priority with the given prompt tokens: an idle one
// takes any; otherwise the prompt must fit under the token limit less the
// headroom kept for the bands above.
func (g *prefixgateGate) paced(pending, tokens, priority int, now time.Time) bool {
	if g.tokenLimit <= 0 || pending == 0 {
		return true
	}
	return pending+tokens <= g.tokenLimit-g.hr.Reserved(priority, g.tokenLimit, now)
}

// saturated reports whether no replica can take a request without it
// queueing in the engine, by flowcontrol.Judge on the in-flight bound and
// the engines' signals; the pending-prefill budget paces dispatch but does
// not make the fleet saturated.
func (g *prefixgateGate) saturated(now time.Time) bool {
	free := false
	g.each(now, func(m flowcontrol.Member) bool {
		m.TokenLimit = 0
		free = flowcontrol.Judge(m, g.th) == flowcontrol.Free
		return !free
	})
	return !free
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
		if it == nil || !g.canTake(it.Flow.Priority, it.PromptTokens, now) {
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
