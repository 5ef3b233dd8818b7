package flowgate

import (
	"time"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/route"
)

// MinProbeStep is flowcontrol.MinProbeStep: the first requests a member
// whose capacity is not known yet takes before a fresh scrape confirms it
// runs them (slow start).
const MinProbeStep = flowcontrol.MinProbeStep

// fitLocked is how the fleet stands for req at band priority now: Fits
// when some candidate takes it now (flowcontrol.Room), else Paced when
// some candidate is held back only by headroom or slow start, or a long
// prompt is held to keep the short-prompt lane free, else Full (the fleet
// is saturated). With no candidate it reports Fits: the router's pick
// then says why. A member in slow start at its probe bound is scraped
// afresh, and the dispatcher woken when the scrape is read.
func (g *Gate) fitLocked(req *route.Request, priority int, now time.Time) flowcontrol.Fit {
	long := g.room.Long(req.PromptTokens)
	n, busy, best := 0, 0, flowcontrol.Full
	g.rt.EachLoad(req.Model, func(l route.Load) bool {
		n++
		if g.room.Busy(l.QueuedTokens) {
			busy++
		}
		var s flowcontrol.Scrape
		if g.signals != nil {
			s = g.signals(l.Member)
		}
		fit, rescrape := g.room.Fit(l.Member, flowcontrol.Load{InFlight: l.Hinted, Limit: l.Threshold, QueuedTokens: l.QueuedTokens},
			s, priority, now)
		if rescrape && g.rescrape != nil {
			t := l.Member
			go func() {
				g.rescrape(t)
				g.wake()
			}()
		}
		best = min(best, fit)
		return long || best != flowcontrol.Fits
	})
	switch {
	case n == 0:
		return flowcontrol.Fits
	case long && best == flowcontrol.Fits && g.room.LaneFull(busy, n, now):
		return flowcontrol.Paced
	}
	return best
}
