package route

// Load is one candidate's load as the router sees it, for a caller that
// decides whether to send a request at all (flow control) before picking.
type Load struct {
	// Member is the candidate itself, as its owner supplied it.
	Member Target
	// InFlight is this router's requests on the member; Hinted adds the
	// load other routers put on it (SetLoadHint).
	InFlight, Hinted int
	// Threshold is the member's concurrency threshold.
	Threshold int
	// QueuedTokens is the prefill work (prompt tokens) charged to the
	// member by picks whose first byte has not come back (prefix-index).
	QueuedTokens int
}

// EachLoad calls fn with the load of every candidate for model (healthy
// members that serve it, "" for any), in name order, until fn returns
// false. It takes no lock and allocates nothing.
func (r *Router) EachLoad(model string, fn func(Load) bool) {
	s := r.snap.Load()
	for i := range s.members {
		m := &s.members[i]
		if !m.t.Healthy() || !m.serves(model) {
			continue
		}
		in := m.st.inflight.Load()
		if !fn(Load{Member: m.t, InFlight: int(in), Hinted: int(in + m.st.hint.Load()),
			Threshold: int(m.threshold), QueuedTokens: int(m.st.prefill.Load())}) {
			return
		}
	}
}

// Watch returns a channel that is closed at the next event that may free
// capacity: a Done, a health change, a lower load hint. The caller counts
// as a waiter, so that Done closes it, until it calls Unwatch once.
func (r *Router) Watch() <-chan struct{} {
	r.waiters.Add(1)
	return *r.wake.Load()
}

// Unwatch ends one Watch.
func (r *Router) Unwatch() { r.waiters.Add(-1) }
