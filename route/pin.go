package route

// PickMember charges the named member for a request, bypassing the policy:
// for a caller that must place a request on one given backend — the
// endpoint a gateway reports it actually used, or a member of a subset the
// gateway allows. With bounded it fails with a *SaturatedError (QueueFull)
// when the member is at its bound (the bounded-load limit or its
// threshold); without, only health and model are checked, since the request
// is already there. An unknown, unhealthy or non-serving member is
// ErrNoCandidates. The Decision's Reason is ReasonAffinity when the member
// is the key's home, else ReasonSpill with Distance 0.
func (r *Router) PickMember(name string, req Request, bounded bool) (Decision, error) {
	s := r.snap.Load()
	idx, ok := s.byName[name]
	n := s.candidates(req.Model)
	if !ok || n == 0 {
		return Decision{}, ErrNoCandidates
	}
	e := pickEnv{r: r, s: s, n: n}
	if !e.candidate(idx, req.Model) {
		return Decision{}, ErrNoCandidates
	}
	total := r.total.Add(1)
	e.bound = s.bound(total+r.hints.Load(), n)
	lim := int64(-1)
	if bounded {
		lim = e.limit(idx, true)
	}
	load, ok := e.take(idx, lim, "member")
	if !ok {
		r.total.Add(-1)
		return Decision{}, r.saturated(&req, 1, true, 0)
	}
	res := result{idx: idx, reason: ReasonSpill, load: load}
	if bounded {
		res.bound = lim
	}
	if _, res.home = e.firstCandidate(req.Key, req.Model); res.home == idx {
		res.reason = ReasonAffinity
	}
	if p, ok := s.policy.(placementLearner); ok && len(req.Blocks) > 0 {
		// The member gets the prompt whatever chose it: learn it there.
		p.learnPlaced(s.members[idx].st.id, req.Blocks)
	}
	return r.decide(s, res, slots.Get().(*releaseSlot)), nil
}
