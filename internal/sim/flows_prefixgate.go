package sim

import (
	"errors"
	"strconv"
	"time"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/route"
)

// prefixgateGate is serve's flow control with its default settings
// (flowgate.Config with the workload's bands as flow_control.objectives;
// Options.FlowControl changes them), on the same package flowcontrol
// types serve's gate uses. Each request of band priority is judged on every candidate by flowcontrol.Room: the
// router's in-flight count against the member's threshold and the
// engine's learned capacity, slow start while no scrape has shown the
// engine queueing (a member at its probe bound is scraped afresh, at most
// every flowgate.DefaultPollInterval), the engine's scraped waiting
// requests, KV use and signal age, and the headroom of active higher
// bands, in requests and in queued prefill (the prefix index's prompt
// tokens without a first token, against
// flow_control.headroom_prefill_tokens); and the short-prompt lane (while
// short prompts are active, a long prompt waits while all but
// flow_control.short_prompt_share of the replicas have a long prompt's
// prefill queued). No token limit applies
// (flow_control.max_queued_tokens is off by default). A request goes on
// at once while its queue is empty and some replica takes it; otherwise
// it waits in the queue (strict priority across bands, virtual token counters
// across flows, FCFS within a flow; a full band evicts its longest flow's
// newest request for a shorter flow's arrival). A sheddable request is
// refused at once only when every replica is full; held back by headroom
// or slow start alone it waits (Queue.Hold). The queue's head goes on
// whenever an engine event may have freed a replica, and at least every
// poll interval, as serve's dispatcher does; the replica is picked then,
// by the default routing policy. Engines are scraped every
// backends.DefaultScrapeInterval. No priority is sent to the engines
// (flow_control.engine_priority is off by default).
type prefixgateGate struct {
	gateLog
	q    *flowcontrol.Queue
	room *flowcontrol.Room[int]
	send bool // flow_control.engine_priority

	scrapeAt time.Time
	scraped  bool
	scrapes  []flowcontrol.Scrape // each replica's last scrape
	rp       *routePicker         // the router, whose loads flow control reads
}

// pgObjectives are the workload's bands as flow_control.objectives.
var pgObjectives = map[string]string{"interactive": strconv.Itoa(PriorityInteractive),
	"standard": strconv.Itoa(PriorityStandard), "batch": strconv.Itoa(PriorityBatch)}

func newPrefixgateGate(f *fleet) (flowGate, error) {
	cfg := f.opts.FlowControl
	if len(cfg.Objectives) == 0 {
		cfg.Objectives = pgObjectives
	}
	pol, rc, err := cfg.Parts()
	if err != nil {
		return nil, err
	}
	room, err := flowcontrol.NewRoom[int](rc)
	if err != nil {
		return nil, err
	}
	rp, ok := f.pickers[0].(*routePicker)
	if !ok || len(f.pickers) != 1 {
		return nil, errors.New("sim: the prefixgate flow-control variant needs one router of a route policy")
	}
	g := &prefixgateGate{gateLog: newGateLog(f), q: flowcontrol.NewQueue(pol), room: room, send: rc.EnginePriority, rp: rp}
	g.q.OnEvict(func(it *flowcontrol.Item) { g.shed(it.Value.(*flight), g.now) })
	return g, nil
}

func flowOf(fl *flight) flowcontrol.Flow {
	return flowcontrol.Flow{FairnessID: fl.req.Flow, Priority: fl.req.Priority}
}

func (g *prefixgateGate) arrive(fl *flight, now time.Time) {
	g.at(now)
	flow := flowOf(fl)
	g.room.Saw(flow.Priority, fl.req.est, now)
	fit := g.fit(flow.Priority, fl.req.est, now)
	if g.q.Len() == 0 && fit == flowcontrol.Fits {
		g.q.Charge(flow, fl.req.est, 0)
		g.f.route(fl, now)
		return
	}
	it := &flowcontrol.Item{Flow: flow, PromptTokens: fl.req.est, Bytes: int64(fl.req.est) * charsPerTok, Value: fl}
	push := g.q.Hold // paced, not saturated: every band waits
	if fit == flowcontrol.Full {
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

// fit is how the fleet stands at now for a request of band priority with
// a prompt of tokens, as serve's gate judges it: Fits when some candidate
// takes it, Paced when some is held back only by headroom or slow start
// or a long prompt is held to keep the short-prompt lane free, else Full.
// A replica the Room finds due a fresh scrape is scraped at once and
// judged again.
func (g *prefixgateGate) fit(priority, tokens int, now time.Time) flowcontrol.Fit {
	g.scrape(now)
	long := g.room.Long(tokens)
	n, busy, best := 0, 0, flowcontrol.Full
	g.rp.r.EachLoad("", func(l route.Load) bool {
		n++
		if g.room.Busy(l.QueuedTokens) {
			busy++
		}
		a := g.rp.idx[l.Member.ID()]
		ld := flowcontrol.Load{InFlight: l.Hinted, Limit: l.Threshold, QueuedTokens: l.QueuedTokens}
		fit, rescrape := g.room.Fit(a, ld, g.scrapes[a], priority, now)
		if rescrape {
			g.scrapes[a] = g.read(a, now)
			fit, _ = g.room.Fit(a, ld, g.scrapes[a], priority, now)
		}
		best = min(best, fit)
		return long || best != flowcontrol.Fits
	})
	if long && best == flowcontrol.Fits && g.room.LaneFull(busy, n, now) {
		return flowcontrol.Paced
	}
	return best
}

// scrape reads every replica's metrics if backends.DefaultScrapeInterval
// has passed.
func (g *prefixgateGate) scrape(now time.Time) {
	if g.scraped && now.Sub(g.scrapeAt) < backends.DefaultScrapeInterval && len(g.scrapes) == len(g.f.reps) {
		return
	}
	g.scraped, g.scrapeAt = true, now
	g.scrapes = g.scrapes[:0]
	for a := range g.f.reps {
		g.scrapes = append(g.scrapes, g.read(a, now))
	}
}

// read is replica a's metrics at now.
func (g *prefixgateGate) read(a int, now time.Time) flowcontrol.Scrape {
	st := g.f.reps[a].eng.Stats()
	return flowcontrol.Scrape{Known: true, At: now, Running: st.Running, Waiting: st.Waiting, KVUtil: st.KVCacheUsage, TakesPriority: true}
}

func (g *prefixgateGate) wake(now time.Time) {
	g.at(now)
	g.q.Expire(now, func(it *flowcontrol.Item) { g.shed(it.Value.(*flight), now) })
	for {
		it := g.q.Peek()
		if it == nil || g.fit(it.Flow.Priority, it.PromptTokens, now) != flowcontrol.Fits {
			return
		}
		g.q.Pop()
		g.f.route(it.Value.(*flight), now)
	}
}

// next is the dispatcher's next look while requests wait: the next poll,
// scrape or expiry, whichever is first.
func (g *prefixgateGate) next() (time.Time, bool) {
	if g.q.Len() == 0 {
		return time.Time{}, false
	}
	t := g.scrapeAt.Add(backends.DefaultScrapeInterval)
	if p := g.now.Add(flowgate.DefaultPollInterval); p.Before(t) {
		t = p
	}
	if e, ok := g.q.NextExpiry(); ok && e.Before(t) {
		t = e
	}
	return g.later(t), true
}

func (g *prefixgateGate) timer(now time.Time) { g.wake(now) }

// enginePriority is the priority sent with fl: none unless
// flow_control.engine_priority is on.
func (g *prefixgateGate) enginePriority(fl *flight) int {
	if !g.send {
		return 0
	}
	return g.gateLog.enginePriority(fl)
}

func (g *prefixgateGate) finished(fl *flight, at time.Time, out int) {
	g.gateLog.finished(fl, at, out)
	g.q.Charge(flowOf(fl), 0, out)
}
