package route

import (
	"fmt"
	"slices"
)

// Explanation says where a request would go now and why, without charging
// anything. AdminService.Explain and debugging headers render it.
type Explanation struct {
	Policy string
	// Backend is where the request would go; empty with Err set.
	Backend  string
	Home     string
	Reason   Reason
	Distance int
	// Bound is the bounded-load limit for this request (ceil(c·(total+1)/n)).
	Bound      int
	Candidates int
	// TotalInFlight counts requests in flight, including other routers' as
	// of the last load hints (SetLoadHint).
	TotalInFlight int
	// Skipped lists members passed over, in the order they were considered.
	Skipped []Skip
	// Costs lists, for prefix-index, every candidate in ring order from the
	// key's home with what the policy predicted for it.
	Costs []CandidateCost
	// Err is ErrNoCandidates, ErrUnknownModel or ErrSaturated when the
	// request would not be placed at once.
	Err error
}

// CandidateCost is prefix-index's prediction for one candidate.
type CandidateCost struct {
	Backend string
	// MatchedTokens is the prompt prefix, in tokens, the index says the
	// candidate holds.
	MatchedTokens int
	// Cost is the predicted work in prompt tokens: uncached prefill plus
	// queued prefill plus DecodeWeight per request held.
	Cost int
	// Load is the requests it holds (with load hints); Bound what it may.
	Load, Bound int
	// Why it lost ("chosen" for the winner).
	Why string
}

// Skip is one member passed over and why.
type Skip struct {
	Backend string
	// Via is where it was met: "home", "spill-chain", "walk" or the policy.
	Via string
	// Why is e.g. "ejected", "does not serve model \"x\"", "at bound 3/3",
	// "at threshold 64/64".
	Why string
}

func (x *Explanation) skip(name, via string, load, limit, threshold int64) {
	why := fmt.Sprintf("at bound %d/%d", load, limit)
	if limit >= threshold {
		why = fmt.Sprintf("at threshold %d/%d", load, threshold)
	}
	x.Skipped = append(x.Skipped, Skip{Backend: name, Via: via, Why: why})
}

func (x *Explanation) skipNot(name, via, why string) {
	if slices.ContainsFunc(x.Skipped, func(s Skip) bool { return s.Backend == name && s.Why == why }) {
		return
	}
	x.Skipped = append(x.Skipped, Skip{Backend: name, Via: via, Why: why})
}

// Explain runs the policy as a dry run: where req would go now and why, with
// the members skipped on the way. Nothing is charged; concurrent picks may
// make the real decision differ. Random policies draw from the same stream
// as picks.
func (r *Router) Explain(req Request) Explanation {
	s := r.snap.Load()
	n := s.candidates(req.Model)
	total := r.total.Load() + r.hints.Load() + 1
	bound := s.bound(total, n)
	x := Explanation{Policy: s.cfg.Policy, Candidates: n, TotalInFlight: int(total - 1), Bound: int(bound)}
	if req.Blocks != nil {
		req.Blocks = slices.Clone(req.Blocks) // Explain may run while the caller reuses it
	}
	if n == 0 {
		x.Err = s.noCandidates(req.Model)
		return x
	}
	e := pickEnv{r: r, s: s, n: n, bound: bound, ex: &x}
	res := s.policy.pick(&e, &req)
	if res.home >= 0 && res.status != noCandidates {
		x.Home = s.members[res.home].name
	}
	switch res.status {
	case picked:
		x.Backend = s.members[res.idx].name
		x.Reason, x.Distance = res.reason, res.dist
	case saturated:
		x.Err = ErrSaturated
	case noCandidates:
		x.Err = s.noCandidates(req.Model)
	}
	return x
}

// MemberStatus is one member's routing state.
type MemberStatus struct {
	Name string
	// Member is the member itself, as its owner supplied it.
	Member Target
	// Healthy is the member's Healthy at the time of the call.
	Healthy  bool
	InFlight int
	// Share is the fraction of the key space the member owns on the ring
	// (all members, ignoring health and load).
	Share     float64
	Threshold int
	Models    []string
	// Load is InFlight plus the other routers' requests as of the last
	// SetLoadHint: what the bound and threshold are checked against. It
	// equals InFlight when no hint is set.
	Load int
	// Bound is what the member may hold now for a request of any model:
	// min(Threshold, ceil(c·(total+1)/healthy)).
	Bound int
}

// Status reports every current member, in name order.
func (r *Router) Status() []MemberStatus {
	s := r.snap.Load()
	b := s.bound(r.total.Load()+r.hints.Load()+1, s.healthy)
	out := make([]MemberStatus, len(s.members))
	for i := range s.members {
		m := &s.members[i]
		out[i] = MemberStatus{
			Name:      m.name,
			Member:    m.t,
			Healthy:   m.t.Healthy(),
			InFlight:  int(m.st.inflight.Load()),
			Load:      int(m.st.load()),
			Share:     s.ring.share[i],
			Threshold: int(m.threshold),
			Models:    slices.Clone(m.models),
			Bound:     int(min(b, m.threshold)),
		}
	}
	return out
}

// InFlight is the number of requests picked and not yet Done, on all members
// including removed ones.
func (r *Router) InFlight() int { return int(r.total.Load()) }

// Home returns the ring owner of key among healthy members, ignoring load
// and models: the backend a request with this key and no model would get on
// an idle fleet. It is "" when no member is healthy.
func (r *Router) Home(key uint64) string {
	e := pickEnv{r: r, s: r.snap.Load()}
	if _, o := e.firstCandidate(key, ""); o >= 0 {
		return e.s.members[o].name
	}
	return ""
}
