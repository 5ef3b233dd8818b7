package flowcontrol

// SetPolicy puts q under p, keeping every queued item where it stands.
// Each band takes p's limits: an item's deadline becomes its push time
// plus its band's new TTL, so a shorter TTL expires waiting items sooner
// (Expire answers them) and a longer one lets them wait longer. A band
// left above its new MaxRequests or MaxBytes keeps what it holds and
// refuses arrivals, evicting none, until it drains below them. A band
// whose priority p no longer names takes p's default limits and is
// served like any other. Past p's MaxFlows, idle flows are forgotten,
// least recently used first; flows with queued items are kept. The
// prompt weight applies to work charged from then on.
func (q *Queue) SetPolicy(p *Policy) {
	q.p = p
	for _, b := range q.bands {
		b.lim = p.Band(b.prio)
		for it := b.head; it != nil; it = it.bnext {
			it.deadline = it.enq.Add(b.lim.TTL)
		}
	}
	for len(q.flows) > p.maxFlows && q.idleHead != nil {
		fs := q.idleHead
		q.unidle(fs)
		delete(q.flows, fs.flow)
	}
}

// SetConfig puts r under cfg, validated, keeping what it learned: each
// member's capacity, the bands seen active and when a short prompt was
// last seen.
func (r *Room[K]) SetConfig(cfg RoomConfig) error {
	cfg, err := cfg.Validate()
	if err != nil {
		return err
	}
	r.cfg = cfg
	r.hr.cfg = cfg.Headroom
	return nil
}
