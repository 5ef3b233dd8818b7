package flowgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/route"
)

// MaxQueues bounds the per-model queues (and so the models whose flows
// are remembered).
const MaxQueues = 1024

// Scrape is what a member's engine said at its last scrape.
type Scrape = flowcontrol.Scrape

// SignalFunc reads a member's last scrape; nil reads none.
type SignalFunc func(route.Target) Scrape

// Gate is flow control in front of a router, for every front door: a
// request either goes through at once (the fleet is not saturated and
// nobody of its model waits) or waits in its model's queue until the
// dispatcher picks a backend for it, or is refused. Safe for concurrent
// use.
type Gate struct {
	// c is the configuration in force: read without the lock, replaced
	// under it (Reconfigure).
	c       atomic.Pointer[compiled]
	rt      *route.Router
	signals SignalFunc
	// rescrape scrapes a member's engine at once (SetRescrape).
	rescrape func(route.Target)
	log      *slog.Logger
	m        *metrics

	mu      sync.Mutex
	queues  map[string]*flowcontrol.Queue
	room    *flowcontrol.Room[route.Target]
	queued  int
	running bool
	kick    chan struct{}
}

// New returns the gate for cfg in front of rt. It registers its metrics
// with reg when reg is not nil.
func New(cfg Config, rt *route.Router, signals SignalFunc, log *slog.Logger, reg prometheus.Registerer) (*Gate, error) {
	c, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	rc := c.room
	rc.Rescrape = 0 // until SetRescrape
	room, err := flowcontrol.NewRoom[route.Target](rc)
	if err != nil {
		return nil, err
	}
	g := &Gate{rt: rt, signals: signals, log: log, m: newMetrics(c), queues: map[string]*flowcontrol.Queue{},
		room: room, kick: make(chan struct{}, 1)}
	g.c.Store(&c)
	if reg != nil {
		for _, col := range g.m.collectors() {
			if err := reg.Register(col); err != nil {
				return nil, fmt.Errorf("flow control metrics: %w", err)
			}
		}
	}
	return g, nil
}

// SetRescrape gives the gate a function that scrapes a member's engine at
// once and returns when the scrape is read; call it before the gate is
// used. With it, a member whose capacity is not known yet is loaded step
// by step, each step confirmed by a fresh scrape, so a burst cannot fill
// an engine's queue before the gate has seen it queue.
func (g *Gate) SetRescrape(f func(route.Target)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rescrape = f
	if err := g.room.SetConfig(g.roomConfigLocked(g.c.Load())); err != nil {
		panic(err) // validated in New
	}
}

// roomConfigLocked is c's RoomConfig as the gate runs it: slow start
// only with a way to rescrape (SetRescrape).
func (g *Gate) roomConfigLocked(c *compiled) flowcontrol.RoomConfig {
	rc := c.room
	if g.rescrape == nil {
		rc.Rescrape = 0
	}
	return rc
}

// Enabled reports whether flow control is on; when it is not, callers use
// the router directly.
func (g *Gate) Enabled() bool { return g != nil && g.c.Load().cfg.On() }

// Config is the gate's configuration in force.
func (g *Gate) Config() Config { return g.c.Load().cfg }

// Admission is how a request went through the gate.
type Admission struct {
	// Queued is true when the request waited in the queue.
	Queued bool
	// Position is where it stood when it was queued.
	Position flowcontrol.Position
	// Waited is how long it waited.
	Waited time.Duration
}

type result struct {
	d   route.Decision
	err error
}

// waiter is a queued request.
type waiter struct {
	item flowcontrol.Item
	req  route.Request
	ch   chan result
	s    *series
}

// Acquire admits a request of flow f for req, whose body is bytes long:
// it returns the router's pick (call its Done as after route.Router.Pick)
// once a backend can take it. A refused request's error is a 429
// *pipeline.Error with RetryAfter; the router's own errors (no candidate)
// are returned as they are; a request whose ctx ends leaves the queue at
// once with ctx's error.
func (g *Gate) Acquire(ctx context.Context, f flowcontrol.Flow, req route.Request, bytes int) (route.Decision, Admission, error) {
	now := time.Now()
	d, w, pos, err := g.admit(f, req, bytes, now)
	if w == nil || err != nil {
		return d, Admission{}, err
	}
	g.wake()
	return g.await(ctx, w, pos, now)
}

// admit picks a backend for req at once when the fleet has room and
// nobody of its model waits (w is nil), else queues a waiter for it or
// refuses it.
func (g *Gate) admit(f flowcontrol.Flow, req route.Request, bytes int, now time.Time) (route.Decision, *waiter, flowcontrol.Position, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.room.Saw(f.Priority, req.PromptTokens, now)
	s := g.m.of(f)
	q := g.queues[req.Model]
	fit := g.fitLocked(&req, f.Priority, now)
	if (q == nil || q.Len() == 0) && fit == flowcontrol.Fits {
		d, err := g.rt.TryPick(req)
		if !errors.Is(err, route.ErrSaturated) {
			if err == nil {
				if q == nil {
					q = g.queue(req.Model)
				}
				g.chargeLocked(q, s, f, req.PromptTokens, 0)
				s.dispatched.Inc()
				s.wait.Observe(0)
			}
			return d, nil, flowcontrol.Position{}, err
		}
		fit = flowcontrol.Full // the router found every candidate full
	}
	w := &waiter{req: req, ch: make(chan result, 1), s: s}
	w.item = flowcontrol.Item{Flow: f, PromptTokens: req.PromptTokens, Bytes: int64(bytes), Value: w}
	pos, err := g.pushLocked(q, w, fit == flowcontrol.Full, now)
	return route.Decision{}, w, pos, err
}

// pushLocked queues w in its model's queue (created if need be), or
// refuses it. A sheddable request is refused while the fleet is
// saturated; held back only by headroom or slow start it waits
// (flowcontrol.Queue.Hold), as capacity exists to run it.
func (g *Gate) pushLocked(q *flowcontrol.Queue, w *waiter, saturated bool, now time.Time) (flowcontrol.Position, error) {
	if q == nil {
		if q = g.queue(w.req.Model); q == nil {
			return flowcontrol.Position{}, g.refuseLocked(w, flowcontrol.ReasonFlows, 0)
		}
	}
	push := q.Hold
	if saturated {
		push = q.Push
	}
	if err := push(&w.item, now); err != nil {
		var se *flowcontrol.ShedError
		if errors.As(err, &se) {
			return flowcontrol.Position{}, g.refuseLocked(w, se.Reason, 0)
		}
		return flowcontrol.Position{}, err
	}
	g.queued++
	w.s.queued.Inc()
	if !g.running {
		g.running = true
		go g.run()
	}
	return q.Position(&w.item), nil
}

// remove takes w out of its queue; false if it was dispatched or refused
// meanwhile.
func (g *Gate) remove(w *waiter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[w.req.Model]
	if q == nil || !q.Remove(&w.item) {
		return false
	}
	g.queued--
	w.s.queued.Dec()
	return true
}

// await waits for w's dispatch, its refusal, or the end of ctx.
func (g *Gate) await(ctx context.Context, w *waiter, pos flowcontrol.Position, start time.Time) (route.Decision, Admission, error) {
	adm := Admission{Queued: true, Position: pos}
	select {
	case r := <-w.ch:
		adm.Waited = time.Since(start)
		r.d.Queued = adm.Waited
		return r.d, adm, r.err
	case <-ctx.Done():
	}
	if !g.remove(w) {
		// Dispatched or refused meanwhile: the answer is in the channel.
		if r := <-w.ch; r.err == nil {
			r.d.Done()
		}
	}
	adm.Waited = time.Since(start)
	return route.Decision{}, adm, fmt.Errorf("flow control: waiting in the queue: %w", context.Cause(ctx))
}

// queue returns model's queue, creating it; nil when MaxQueues exist and
// none is empty to reuse.
func (g *Gate) queue(model string) *flowcontrol.Queue {
	if q := g.queues[model]; q != nil {
		return q
	}
	if len(g.queues) >= MaxQueues {
		for m, q := range g.queues {
			if q.Len() == 0 {
				delete(g.queues, m)
				break
			}
		}
		if len(g.queues) >= MaxQueues {
			return nil
		}
	}
	q := flowcontrol.NewQueue(g.c.Load().policy)
	q.OnEvict(g.evictedLocked)
	g.queues[model] = q
	return q
}

// evictedLocked answers a request a full band took out for a shorter
// flow's arrival (flowcontrol.Queue.OnEvict).
func (g *Gate) evictedLocked(it *flowcontrol.Item) {
	w := it.Value.(*waiter)
	g.queued--
	w.s.queued.Dec()
	w.ch <- result{err: g.refuseLocked(w, flowcontrol.ReasonEvicted, time.Since(it.Enqueued()))}
}

// refuseLocked counts, logs and returns the 429 for a refused request.
func (g *Gate) refuseLocked(w *waiter, reason flowcontrol.Reason, waited time.Duration) error {
	f := w.item.Flow
	g.m.shedOne(w.s, reason)
	if g.log != nil {
		g.log.Warn("request shed", "fairness_id", f.FairnessID, "priority", f.Priority, "reason", string(reason),
			"model", w.req.Model, "waited", waited)
	}
	return &pipeline.Error{Status: http.StatusTooManyRequests, Code: "flow_control_" + string(reason), RetryAfter: DefaultRetryAfter,
		Message: fmt.Sprintf("flow control refused the request of fairness id %q at priority %d: %s", f.FairnessID, f.Priority, reasonText(reason))}
}

func reasonText(r flowcontrol.Reason) string {
	switch r {
	case flowcontrol.ReasonSheddable:
		return "the fleet is saturated and the request's objective is sheddable (priority below 0)"
	case flowcontrol.ReasonQueueFull:
		return "the fleet is saturated and its band's queue holds flow_control.max_queued_requests requests"
	case flowcontrol.ReasonQueueBytes:
		return "the fleet is saturated and its band's queue holds flow_control.max_queued_bytes bytes"
	case flowcontrol.ReasonTTL:
		return "it waited its band's time to live (flow_control.ttl) while the fleet was saturated"
	case flowcontrol.ReasonEvicted:
		return "its band's queue was full and the request was the newest of the flow with the most queued, taken out for another flow's request"
	case flowcontrol.ReasonFlows:
		return "the fleet is saturated and flow_control.max_flows flows are all waiting"
	}
	return "the fleet is saturated and the queue has no room for another band"
}

// Charge counts served tokens to f for model's fairness: the output
// tokens of an answer (prompt tokens were charged at dispatch).
func (g *Gate) Charge(model string, f flowcontrol.Flow, promptTokens, outputTokens int) {
	if !g.Enabled() || promptTokens <= 0 && outputTokens <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.chargeLocked(g.queue(model), g.m.of(f), f, promptTokens, outputTokens)
}

// chargeLocked charges f in q (nil when there is no room for its model's
// queue) and counts the tokens in s.
func (g *Gate) chargeLocked(q *flowcontrol.Queue, s *series, f flowcontrol.Flow, prompt, output int) {
	if q != nil {
		q.Charge(f, prompt, output)
	}
	if prompt > 0 {
		s.prompt.Add(float64(prompt))
	}
	if output > 0 {
		s.output.Add(float64(output))
	}
}
