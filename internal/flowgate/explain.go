package flowgate

import (
	"strconv"
	"time"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/route"
)

// Explanation is what flow control would do with a request now.
type Explanation struct {
	Identity
	// Saturated is true when no candidate could take the request now
	// without it queueing in its engine (headroom counted).
	Saturated bool
	// Ahead is the number of requests of its model queued at its priority
	// or above: a request that waits waits behind them.
	Ahead int
	// Queued is the number of requests of its model queued in all.
	Queued int
}

// Explain says what flow control would do with a request of id for req.
func (g *Gate) Explain(id Identity, req route.Request) Explanation {
	ex := Explanation{Identity: id}
	if !g.Enabled() {
		return ex
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ex.Saturated = g.fitLocked(&req, id.Flow.Priority, time.Now()) != flowcontrol.Fits
	if q := g.queues[req.Model]; q != nil {
		ex.Ahead, ex.Queued = q.Ahead(id.Flow.Priority), q.Len()
	}
	return ex
}

// HeaderValue is the FlowHeader value of a request that went through as
// adm says: its fairness id, priority, objective and, if it queued, for
// how long and behind how many.
func HeaderValue(id Identity, adm Admission) string {
	b := make([]byte, 0, 96)
	b = append(b, "fairness_id="...)
	b = strconv.AppendQuote(b, id.Flow.FairnessID)
	b = append(b, "; priority="...)
	b = strconv.AppendInt(b, int64(id.Flow.Priority), 10)
	if id.Objective != "" {
		b = append(b, "; objective="...)
		b = strconv.AppendQuote(b, id.Objective)
	}
	if adm.Queued {
		b = append(b, "; queued_ms="...)
		b = strconv.AppendInt(b, adm.Waited.Milliseconds(), 10)
		b = append(b, "; ahead_higher="...)
		b = strconv.AppendInt(b, int64(adm.Position.AheadHigher), 10)
		b = append(b, "; ahead_in_flow="...)
		b = strconv.AppendInt(b, int64(adm.Position.AheadInFlow), 10)
	}
	return string(b)
}

// EnginePriority is the field and value to send an engine that takes
// priorities (field and lowerFirst from its profile) for a request of
// priority; ok is false when none is to be sent: the setting is off, the
// engine takes none, or priority is 0 (every engine's default).
func (g *Gate) EnginePriority(field string, lowerFirst, engineTakes bool, priority int) (string, int, bool) {
	if g == nil || !engineTakes || priority == 0 {
		return "", 0, false
	}
	c := &g.c.Load().cfg
	if !c.On() || !c.EnginePriority {
		return "", 0, false
	}
	if c.EnginePriorityField != "" {
		field = c.EnginePriorityField
	}
	if lowerFirst {
		priority = -priority
	}
	return field, priority, true
}
