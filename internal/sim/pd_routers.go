package sim

import (
	"errors"
	"fmt"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/route"
)

// newPDRouter builds policy's router over pf's pools.
func newPDRouter(pf *pdFleet, policy string) (pdRouter, error) {
	switch policy {
	case route.DefaultPolicy, pdAlwaysSplitPolicy, pdAggregatedPolicy:
		return newPDRoute(pf, policy)
	case pdLLMDPolicy:
		return newPDLLMD(pf), nil
	case pdSMGPolicy:
		return newPDSMG(pf), nil
	}
	return nil, fmt.Errorf("sim: --pd: unknown policy %q", policy)
}

// pdRoute is prefixgate's router: route.Routers of the default policy,
// one per pool, each leg picked by the prefix index over its pool under
// its own bound. The default policy splits by route.PickSplit's cost
// model; always-split splits every request the prefill pool has room
// for; aggregated is one router over every replica that never splits.
type pdRoute struct {
	pf       *pdFleet
	dec, pre *route.Router
	mode     string
	idx      map[string]int
	blocks   []uint64
}

func newPDRoute(pf *pdFleet, mode string) (*pdRoute, error) {
	o := pf.opts
	cfg := route.Config{
		Seed: o.Seed, DefaultThreshold: o.Threshold, LoadFactor: o.LoadFactor, Slack: o.Slack,
		DefaultCacheTokens: pf.w.Engine.CacheBlocks * vllmsim.BlockSize, DecodeWeight: o.DecodeWeight,
		SplitInterference: o.PD.SplitInterference, SplitTransferWeight: o.PD.SplitTransferWeight, SplitMinTokens: o.PD.SplitMinTokens,
	}
	r := &pdRoute{pf: pf, mode: mode, idx: map[string]int{}}
	for _, a := range pf.active {
		r.idx[replicaName(a)] = a
	}
	var err error
	if mode == pdAggregatedPolicy {
		r.dec, err = route.New(cfg, members(pf.active, o.Threshold))
		return r, err
	}
	if r.dec, err = route.New(cfg, members(pf.decode, o.Threshold)); err != nil {
		return nil, err
	}
	r.pre, err = route.New(cfg, members(pf.prefill, o.Threshold))
	return r, err
}

func (r *pdRoute) route(fl *pdFlight) bool {
	req := fl.req.key
	r.blocks = fl.req.appendBlocks(r.blocks[:0])
	req.Blocks, req.PromptTokens = r.blocks, fl.req.est
	var err error
	switch r.mode {
	case pdAggregatedPolicy:
		fl.dec, err = r.dec.TryPick(req)
	case pdAlwaysSplitPolicy:
		if fl.dec, err = r.dec.TryPick(req); err == nil {
			if p, perr := r.pre.TryPick(req); perr == nil {
				fl.preDec, fl.pre = p, r.idx[p.Backend]
				fl.dec.Report(route.Outcome{FirstByte: true}) // the decode worker computes no prefill
			}
		}
	default:
		var sp route.SplitPick
		if sp, err = route.TryPickSplit(r.dec, r.pre, req); err == nil {
			fl.dec = sp.Decode
			if sp.Split.Split {
				fl.preDec, fl.pre = sp.Prefill, r.idx[sp.Prefill.Backend]
			}
		}
	}
	if err != nil {
		if errors.Is(err, route.ErrSaturated) || errors.Is(err, route.ErrNoCandidates) {
			return false
		}
		panic(err) // TryPick returns no other errors
	}
	fl.replica = r.idx[fl.dec.Backend]
	return true
}

func (r *pdRoute) prefilled(fl *pdFlight, cached, prompt int) {
	fl.preDec.DoneWith(route.Outcome{FirstByte: true, CachedTokens: cached, PromptTokens: prompt})
}

func (r *pdRoute) firstToken(fl *pdFlight, cached, prompt int) {
	fl.dec.Report(route.Outcome{FirstByte: true, CachedTokens: cached, PromptTokens: prompt})
}

// done ends both picks; the decode replica holds the answer too, the next
// turn's prefix, so its index learns it.
func (r *pdRoute) done(fl *pdFlight) {
	fl.preDec.Done()
	o := route.Outcome{PromptTokens: -1, CachedTokens: -1}
	if fl.req.answer != nil {
		r.blocks = append(fl.req.appendBlocks(r.blocks[:0]), fl.req.answer...)
		o.Blocks = r.blocks
	}
	fl.dec.DoneWith(o)
}

// pdLLMD is llm-d's P/D scheduling (llm-d-inference-scheduler): the
// decode profile picks the decode endpoint, the prefix-based-pd-decider
// (nonCachedTokens: 512, its example configuration) reads that endpoint's
// prefix-cache match and splits when at least 512 of the prompt's tokens
// are not in it, and the prefill profile then picks the prefill endpoint.
// Both profiles score as the endpoint picker's default profile does
// (giePicker: prefix-cache, queue and KV-utilization scorers).
type pdLLMD struct {
	pf       *pdFleet
	dec, pre *giePicker
}

// llmdNonCachedTokens is the decider's threshold in llm-d's example
// configuration.
const llmdNonCachedTokens = 512

func newPDLLMD(pf *pdFleet) *pdLLMD {
	dec := newGIEPicker(pf.fleet, pf.opts.Seed).(*giePicker)
	pre := newGIEPicker(pf.fleet, pf.opts.Seed+7919).(*giePicker)
	_ = dec.setMembers(pf.decode)
	_ = pre.setMembers(pf.prefill)
	return &pdLLMD{pf: pf, dec: dec, pre: pre}
}

func (r *pdLLMD) route(fl *pdFlight) bool {
	fl.replica, _ = r.dec.pick(&fl.flight)
	// The decider estimates the prompt at 4 characters a token and counts
	// the decode endpoint's matched blocks at 64 characters each.
	input := len(r.dec.text) / charsPerTok
	hit := r.dec.points[fl.replica] * gieBlock / charsPerTok
	if input >= llmdNonCachedTokens && input-hit >= llmdNonCachedTokens {
		pl := flight{req: fl.req, now: fl.now}
		fl.pre, _ = r.pre.pick(&pl)
	}
	return true
}

func (r *pdLLMD) prefilled(*pdFlight, int, int)  {}
func (r *pdLLMD) firstToken(*pdFlight, int, int) {}
func (r *pdLLMD) done(*pdFlight)                 {}

// pdSMG is SGLang Model Gateway's PD router (sgl-model-gateway, pd_router):
// every request is split; the prefill worker is chosen by the prefill
// policy over the prefill workers and the decode worker by the decode
// policy over the decode workers, each defaulting to the gateway's
// policy, cache_aware with its defaults (sglangPicker), one instance per
// pool.
type pdSMG struct {
	dec, pre *sglangPicker
}

func newPDSMG(pf *pdFleet) *pdSMG {
	dec := newSGLangPicker(pf.fleet, pf.opts.Seed).(*sglangPicker)
	pre := newSGLangPicker(pf.fleet, pf.opts.Seed+7919).(*sglangPicker)
	_ = dec.setMembers(pf.decode)
	_ = pre.setMembers(pf.prefill)
	return &pdSMG{dec: dec, pre: pre}
}

func (r *pdSMG) route(fl *pdFlight) bool {
	pl := flight{req: fl.req, now: fl.now}
	fl.pre, _ = r.pre.pick(&pl)
	fl.replica, _ = r.dec.pick(&fl.flight)
	return true
}

// prefilled ends the prefill leg in the gateway's load count.
func (r *pdSMG) prefilled(fl *pdFlight, _, _ int) {
	r.pre.done(&flight{replica: fl.pre})
}

func (r *pdSMG) firstToken(*pdFlight, int, int) {}

func (r *pdSMG) done(fl *pdFlight) {
	if fl.pre >= 0 && !fl.preDone {
		r.pre.done(&flight{replica: fl.pre})
	}
	r.dec.done(&fl.flight)
}
