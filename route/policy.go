package route

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// policy chooses a member for a request from a snapshot. A new policy is one
// file: a type implementing policy and an init that registers it by name.
// pick must charge the chosen member through pickEnv.take (which honours the
// explain dry run) and must not retain e or req.
type policy interface {
	pick(e *pickEnv, req *Request) result
}

// What a policy needs and keeps, it says by implementing the optional
// interfaces below; the router and its callers ask for them (NeedsBlocks,
// LearnsPlacements, PlacesByKey) and never compare a policy's name or type.

// blockReader is a policy that reads Request.Blocks and PromptTokens:
// callers hash a prompt into blocks only for one (Router.NeedsBlocks).
type blockReader interface{ readsBlocks() }

// placementLearner is a policy that remembers which member holds which
// prompt, so that a pick changes where later picks go
// (Router.LearnsPlacements). It learns a placement it did not choose too
// (PickMember).
type placementLearner interface {
	learnPlaced(id int32, blocks []uint64)
}

// outcomeLearner learns from what became of a request: a policy that does
// puts one in its pick's release slot with the prediction it made, and
// Report hands it the outcome (the engine's cached tokens, the answer's
// blocks) once each.
type outcomeLearner interface {
	// feedback compares the cached tokens member id reported with the
	// matched blocks of nblocks predicted.
	feedback(id int32, matched, nblocks, cached, promptTokens int)
	// learn records that member id holds blocks; hints are the index
	// entries the pick held for the prompt's samples.
	learn(id int32, blocks []uint64, hints []uint32)
}

// memberKeeper is a policy with per-member state keyed by memberState.id:
// it is told each member's cache size and which ids are forgotten.
type memberKeeper interface {
	setMember(id int32, cacheTokens int)
	dropMember(id int32)
}

// statsReporter is a policy that reports the state it keeps
// (Router.IndexStats). mispredictions outlives the policy: Reconfigure
// carries it over to the next one.
type statsReporter interface {
	indexStats(members []memberView) IndexStats
	mispredictions() uint64
}

// keyPlacer is a policy that sends a request to its key's home (Home)
// unless the home is over a bound, so a change of members moves only the
// keys of the members added or removed (Router.PlacesByKey).
type keyPlacer interface{ placesByKey() }

// policyEntry is a registered policy: its constructor and its defaults for
// Config fields left zero.
type policyEntry struct {
	build func(Config) policy
	// slack is Config.Slack when it is 0; 0 means DefaultSlack.
	slack int
}

// policies maps Config.Policy names to their entries; files register in init.
var policies = map[string]policyEntry{}

func register(name string, e policyEntry) { policies[name] = e }

// Policies lists the policy names Config.Policy accepts.
func Policies() []string { return slices.Sorted(maps.Keys(policies)) }

// dispatch calls the policy. Built-in policies are called through their
// concrete types so escape analysis keeps e and req on the caller's stack;
// any other policy goes through the interface with heap copies (it works,
// at the cost of allocations).
func dispatch(e *pickEnv, req *Request) result {
	switch p := e.s.policy.(type) {
	case prefixAware:
		return p.pick(e, req)
	case consistentHash:
		return p.pick(e, req)
	case leastOutstanding:
		return p.pick(e, req)
	case randomPolicy:
		return p.pick(e, req)
	case *prefixIndexPolicy:
		return p.pick(e, req)
	}
	ec, rc := new(pickEnv), new(Request)
	*ec = *e
	rc.Key, rc.SpillKeys, rc.Model = req.Key, slices.Clone(req.SpillKeys), strings.Clone(req.Model)
	rc.Blocks, rc.PromptTokens = slices.Clone(req.Blocks), req.PromptTokens
	return e.s.policy.pick(ec, rc)
}

// pickEnv is one pick's view: the snapshot, the candidate count n and the
// bounded-load limit computed from the reserved total. A dry run is one
// with an explanation (Explain): take checks without charging and skips
// are recorded.
type pickEnv struct {
	r     *Router
	s     *snapshot
	n     int
	bound int64
	ex    *Explanation
	slot  *releaseSlot // the release slot a prefix-index charge filled, else nil
	dry   bool         // a dry run that records nothing (Probe)
}

// healthNamer is implemented by targets that name their unhealthy state
// ("ejected", "draining") for explanations.
type healthNamer interface{ HealthName() string }

// notCandidate tells why member i is not a candidate, or "" if it is.
func (e *pickEnv) notCandidate(i int32, model string) string {
	m := &e.s.members[i]
	if !m.t.Healthy() {
		if hn, ok := m.t.(healthNamer); ok {
			return hn.HealthName()
		}
		return "not healthy"
	}
	if !m.serves(model) {
		return "does not serve model " + strconv.Quote(model)
	}
	return ""
}

func (e *pickEnv) candidate(i int32, model string) bool {
	m := &e.s.members[i]
	return m.t.Healthy() && m.serves(model)
}

// limit is the most member i may hold after this pick: its threshold, and
// with bounded is true also the bounded-load limit.
func (e *pickEnv) limit(i int32, bounded bool) int64 {
	th := e.s.members[i].threshold
	if bounded && e.bound < th {
		return e.bound
	}
	return th
}

// take charges member i if that keeps it at or below limit and returns its
// load including this request. The compare-and-swap makes the check and the
// increment one step: of two concurrent picks that saw the same load, only
// one can move it, the other re-reads and re-checks. limit < 0 means no
// limit (the consistent-hash reference).
//
// The load checked and returned is the member's in-flight count plus its
// load hint (other routers' requests, see SetLoadHint); only the in-flight
// count is charged.
func (e *pickEnv) take(i int32, limit int64, via string) (int64, bool) {
	st := e.s.members[i].st
	c := &st.inflight
	for {
		l := c.Load()
		x := l + st.hint.Load()
		if limit >= 0 && x+1 > limit {
			if e.ex != nil {
				e.ex.skip(e.s.members[i].name, via, x, limit, e.s.members[i].threshold)
			}
			return x, false
		}
		if e.ex != nil || e.dry {
			return x + 1, true
		}
		if c.CompareAndSwap(l, l+1) {
			return x + 1, true
		}
	}
}

// firstCandidate walks clockwise from key's position on the ring to the
// first vnode whose member is a candidate, returning that vnode and member
// (-1 if none, or if the ring is empty).
func (e *pickEnv) firstCandidate(key uint64, model string) (int, int32) {
	rg := e.s.ring
	n := len(rg.vn)
	if n == 0 {
		return -1, -1
	}
	j := rg.search(key)
	for step := 0; step < n; step++ {
		o := int32(rg.vn[j].owner)
		if e.candidate(o, model) {
			return j, o
		}
		if e.ex != nil {
			e.ex.skipNot(e.s.members[o].name, "walk", e.notCandidate(o, model))
		}
		j++
		if j == n {
			j = 0
		}
	}
	return -1, -1
}
