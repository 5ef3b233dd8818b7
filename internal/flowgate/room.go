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
// some candidate is held back only by headroom or slow start, else Full
// (the fleet is saturated). With no candidate it reports Fits: the
// router's pick then says why. A member in slow start at its probe bound
// is scraped afresh, and the dispatcher woken when the scrape is read.
func (g *Gate) fitLocked(req *route.Request, priority int, now time.Time) flowcontrol.Fit {
	seen, best := false, flowcontrol.Full
	g.rt.EachLoad(req.Model, func(l route.Load) bool {
		seen = true
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
		return best != flowcontrol.Fits
	})
	if !seen {
		return flowcontrol.Fits
	}
	return best
}
