package flowgate

import (
	"time"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/route"
)

// capacity is what the gate has learned of a member's engine: how many
// requests it runs at once before it queues. A scrape that shows the
// engine queueing more than the saturation threshold while running n, or
// queueing any while it holds the whole capacity (running plus waiting),
// sets it to n; a scrape that shows it running more raises it; one that
// shows it running the whole capacity with nothing waiting raises it by
// one, so a capacity learned while long prompts filled the KV cache comes
// back up. A scrape that catches a request between its arrival and the
// engine's next scheduling step (a few waiting, room to run them) teaches
// nothing.
type capacity struct {
	at    time.Time // the scrape last read
	slots int       // 0 while unknown
	// ok is the most requests a scrape showed the engine running while
	// it queued no more than the saturation threshold (max_waiting);
	// asked is when a fresh scrape was last asked for.
	ok    int
	asked time.Time
}

func (c *capacity) learn(s Scrape, maxWaiting int) {
	if !s.Known || s.At.Equal(c.at) {
		return
	}
	c.at = s.At
	if (maxWaiting < 0 || s.Waiting <= maxWaiting) && s.Running > c.ok {
		c.ok = s.Running
	}
	switch {
	case s.Running <= 0:
	case maxWaiting >= 0 && s.Waiting > maxWaiting:
		c.slots = s.Running
	case c.slots > 0 && s.Waiting > 0 && s.Running+s.Waiting >= c.slots:
		c.slots = s.Running
	case c.slots > 0 && s.Running > c.slots:
		c.slots = s.Running
	case c.slots > 0 && s.Waiting == 0 && s.Running >= c.slots:
		c.slots++
	}
}

// MinProbeStep is how many requests past the most it was seen running
// without queueing (more than max_waiting) a member whose capacity is not known yet may hold
// before a fresh scrape confirms it runs them (slow start): the step is
// the larger of this and half that most.
const MinProbeStep = 4

// probe is the in-flight bound of a member whose capacity is not known.
func (c *capacity) probe() int { return c.ok + max(MinProbeStep, c.ok/2) }

// maxCaps bounds the members whose capacity is remembered.
const maxCaps = 4096

// roomLocked reports whether some candidate for req can take a request of
// band priority now without it queueing in the engine (flowcontrol.Judge),
// leaving the headroom higher bands are owed. With no candidate it
// reports true: the router's pick then says why.
func (g *Gate) roomLocked(req *route.Request, priority int, now time.Time) bool {
	seen, room := false, false
	g.rt.EachLoad(req.Model, func(l route.Load) bool {
		seen = true
		m := g.member(&l, priority, now)
		room = g.hr.Admits(priority, m.InFlight, m.Limit, now) && flowcontrol.Judge(m, g.c.th) == flowcontrol.Free &&
			g.prefillRoom(l.QueuedTokens, priority, now)
		return !room
	})
	return room || !seen
}

// prefillRoom reports whether a member with queued prefill tokens may
// take a request of band priority: always, unless a band above it is
// active and queued reaches flow_control.headroom_prefill_tokens. So a
// lower band prefills about one long prompt at a time on each member
// while a higher band is active, and a higher band's short prompt shares
// the engine's prefill compute with few others.
func (g *Gate) prefillRoom(queued, priority int, now time.Time) bool {
	limit := g.c.cfg.HeadroomPrefillTokens
	return limit <= 0 || queued < limit || g.hr.Reserved(priority, 2, now) == 0
}

// member is what flow control judges of one candidate: its load against
// the smaller of its threshold and its engine's learned capacity, and the
// engine's signals. While the capacity is known, the engine's waiting
// count (up to a scrape old) is left out: the in-flight count against the
// capacity says the same, exactly and now. Until the capacity is known,
// with a rescrape function set, the member holds at most its probe bound
// (slow start): at it, a fresh scrape is asked for, at most every
// DefaultPollInterval, and one that shows the engine running them all
// without queueing raises the bound. The capacity does not hold back a
// request of the highest active band from an engine that is sent
// priorities: the engine runs it before anything it holds, preempting
// lower work.
func (g *Gate) member(l *route.Load, priority int, now time.Time) flowcontrol.Member {
	m := flowcontrol.Member{InFlight: l.Hinted, Limit: l.Threshold, QueuedTokens: l.QueuedTokens, TokenLimit: g.c.cfg.MaxQueuedTokens}
	if g.signals == nil {
		return m
	}
	s := g.signals(l.Member)
	c := g.caps[l.Member]
	if c == nil {
		if len(g.caps) >= maxCaps {
			clear(g.caps)
		}
		c = &capacity{}
		g.caps[l.Member] = c
	}
	c.learn(s, g.c.th.MaxWaiting)
	switch {
	case g.overtakes(s, priority, now):
	case c.slots > 0:
		m.Limit = min(m.Limit, c.slots)
	case s.Known && g.rescrape != nil && (m.Limit <= 0 || c.probe() < m.Limit):
		m.Limit = c.probe()
		if m.InFlight >= m.Limit && now.Sub(c.asked) >= DefaultPollInterval {
			c.asked = now
			t := l.Member
			go func() {
				g.rescrape(t)
				g.wake()
			}()
		}
	}
	if s.Known {
		m.Engine = flowcontrol.Engine{Known: true, Age: now.Sub(s.At), Waiting: s.Waiting, KVUtil: s.KVUtil}
		if c.slots > 0 {
			m.Engine.Waiting = 0
		}
	}
	return m
}

// overtakes reports whether a request of band priority goes to an engine
// that schedules by priority ahead of everything else active: priorities
// are sent, the engine takes them, and no band above it is active.
func (g *Gate) overtakes(s Scrape, priority int, now time.Time) bool {
	return g.c.cfg.EnginePriority && s.TakesPriority && g.hr.Reserved(priority, 2, now) == 0 && priority > 0
}
