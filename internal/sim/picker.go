package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prefixgate/prefixgate/route"
)

// PolicyNames are the policies the simulator compares, in report order:
// package route's policies (route.Policies(), the ones serve accepts), then
// the peer references of other routers (peer_*.go), then the oracle.
var PolicyNames = policyNames()

// routeOrder is the report order of route's policies that exist; any other
// route policy follows them in name order.
var routeOrder = []string{"random", "least-outstanding", "consistent-hash", "prefix-aware"}

func policyNames() []string {
	var out []string
	have := route.Policies()
	for _, p := range routeOrder {
		if slices.Contains(have, p) {
			out = append(out, p)
		}
	}
	for _, p := range have {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	out = append(out, peerOrder...)
	return append(out, oraclePolicy)
}

// Roles of PolicyResult.Role.
const (
	RoleRoute  = "route"
	RolePeer   = "peer"
	RoleOracle = "oracle"
	RoleReplay = "replay"
)

// PolicyRole tells what a policy name is: a route policy serve accepts, a
// peer reference, the oracle, or the replay of a recorded placement.
func PolicyRole(name string) string {
	switch {
	case name == ReplayPolicy:
		return RoleReplay
	case name == oraclePolicy:
		return RoleOracle
	case peerBuilders[name] != nil:
		return RolePeer
	}
	return RoleRoute
}

// picker is one router's view of the fleet.
type picker interface {
	// pick chooses an active replica for f and charges it, or reports false
	// when every candidate is saturated.
	pick(f *flight) (int, bool)
	// done releases f's charge.
	done(f *flight)
	// setMembers replaces the active replicas.
	setMembers(active []int) error
	// hint reports the fleet's in-flight count of each active replica
	// (inflight is indexed by replica).
	hint(active, inflight []int)
}

// firstTokener is a picker that learns when a request's prefill is done
// (the router sees the first token come back), with the engine's cached
// and prompt token counts as the answer's usage reports them.
type firstTokener interface {
	firstToken(f *flight, cached, prompt int)
}

// routePicker is a real route.Router.
type routePicker struct {
	r      *route.Router
	names  []string // replica index -> member name
	idx    map[string]int
	blocks []uint64 // scratch: a request's blocks
	// withBlocks passes prompt blocks (to a policy that reads them); learn
	// also hands it the answers' blocks.
	withBlocks, learn bool
}

func replicaName(i int) string { return fmt.Sprintf("r%d", i) }

func members(active []int, threshold int) []route.Member {
	ms := make([]route.Member, len(active))
	for i, a := range active {
		ms[i] = route.Member{Name: replicaName(a), Threshold: threshold}
	}
	return ms
}

func newRoutePicker(cfg route.Config, active []int, threshold int, learn bool) (*routePicker, error) {
	r, err := route.New(cfg, members(active, threshold))
	if err != nil {
		return nil, err
	}
	p := &routePicker{r: r, idx: map[string]int{}, withBlocks: r.NeedsBlocks(), learn: learn}
	p.index(active)
	return p, nil
}

func (p *routePicker) index(active []int) {
	for _, a := range active {
		p.idx[replicaName(a)] = a
	}
}

func (p *routePicker) pick(f *flight) (int, bool) {
	req := f.req.key
	if p.withBlocks {
		p.blocks = f.req.appendBlocks(p.blocks[:0])
		req.Blocks, req.PromptTokens = p.blocks, f.req.est
	}
	d, err := p.r.TryPick(req)
	if err != nil {
		if errors.Is(err, route.ErrSaturated) || errors.Is(err, route.ErrNoCandidates) {
			return 0, false
		}
		panic(err) // TryPick returns no other errors
	}
	f.dec = d
	f.spilled = d.Reason == route.ReasonSpill || d.Reason == route.ReasonSpillChain
	return p.idx[d.Backend], true
}

// firstToken feeds the engine's cached-token count back to the router:
// the prefill charge ends and the index checks its prediction.
func (p *routePicker) firstToken(f *flight, cached, prompt int) {
	f.dec.Report(route.Outcome{FirstByte: true, CachedTokens: cached, PromptTokens: prompt})
}

// done ends the request; the replica now holds the answer too, which is
// the next turn's prefix, so the index learns it.
func (p *routePicker) done(f *flight) {
	o := route.Outcome{PromptTokens: -1, CachedTokens: -1}
	if p.withBlocks && p.learn && f.req.answer != nil {
		p.blocks = append(f.req.appendBlocks(p.blocks[:0]), f.req.answer...)
		o.Blocks = p.blocks
	}
	f.dec.DoneWith(o)
}

func (p *routePicker) setMembers(active []int) error {
	p.index(active)
	return p.r.SetMembers(members(active, p.r.Config().DefaultThreshold))
}

func (p *routePicker) home(key uint64) string { return p.r.Home(key) }

func (p *routePicker) hint(active, inflight []int) {
	for _, a := range active {
		p.r.SetLoadHint(replicaName(a), inflight[a])
	}
}
