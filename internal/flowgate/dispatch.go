package flowgate

import (
	"errors"
	"time"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/route"
)

// Wake tells the dispatcher to look again: a backend's load changed
// (an answer's first byte released its prefill work). Requests queued
// before flow control was turned off (Reconfigure) are still dispatched.
func (g *Gate) Wake() {
	if g != nil {
		g.wake()
	}
}

// wake tells the dispatcher to look again (a new request may fit where the
// head did not: headroom).
func (g *Gate) wake() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// run is the dispatcher: while requests wait, it hands each queue's head
// a backend whenever one can take it, refuses those past their TTL, and
// sleeps until a pick is done (route.Router.Watch), a request arrives, a
// deadline passes or the poll interval (engine signals change at each
// scrape) ends. It exits when nothing waits.
func (g *Gate) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		ch := g.rt.Watch()
		next, idle := g.dispatchRound()
		if idle {
			g.rt.Unwatch()
			return
		}
		timer.Reset(min(DefaultPollInterval, max(time.Until(next), time.Millisecond)))
		select {
		case <-ch:
		case <-g.kick:
		case <-timer.C:
		}
		g.rt.Unwatch()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// dispatchRound serves every queue once; idle says nothing waits any
// more (the dispatcher then exits, and the next queued request starts
// another).
func (g *Gate) dispatchRound() (next time.Time, idle bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	next = g.dispatchLocked(time.Now())
	if g.queued == 0 {
		g.running = false
		return next, true
	}
	return next, false
}

// dispatchLocked serves every queue as far as the fleet allows and
// returns the earliest deadline still queued.
func (g *Gate) dispatchLocked(now time.Time) time.Time {
	next := now.Add(time.Hour)
	for _, q := range g.queues {
		q.Expire(now, func(it *flowcontrol.Item) {
			w := it.Value.(*waiter)
			g.queued--
			w.s.queued.Dec()
			w.ch <- result{err: g.refuseLocked(w, flowcontrol.ReasonTTL, now.Sub(it.Enqueued()))}
		})
		for q.Len() > 0 {
			it := q.Peek()
			w := it.Value.(*waiter)
			if g.fitLocked(&w.req, it.Flow.Priority, now) != flowcontrol.Fits {
				break
			}
			d, err := g.rt.TryPick(w.req)
			if errors.Is(err, route.ErrSaturated) {
				break
			}
			q.Pop()
			g.queued--
			w.s.queued.Dec()
			if err == nil {
				w.s.dispatched.Inc()
				w.s.wait.Observe(now.Sub(it.Enqueued()).Seconds())
				if s := w.s; it.PromptTokens > 0 {
					s.prompt.Add(float64(it.PromptTokens))
				}
			}
			w.ch <- result{d: d, err: err}
		}
		if t, ok := q.NextExpiry(); ok && t.Before(next) {
			next = t
		}
	}
	return next
}
