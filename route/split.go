package route

import (
	"context"
	"fmt"
	"math"
)

// Defaults of the split decision's cost model (Config.SplitInterference,
// SplitTransferWeight, SplitMinTokens); docs/disaggregation.md has the
// runs behind them.
const (
	// DefaultSplitInterference is what one uncached prompt token prefilled
	// on a decode worker costs, in tokens of work, for each other request
	// decoding there: its prefill chunk lengthens the step every one of
	// them waits for.
	DefaultSplitInterference = 0.1
	// DefaultSplitTransferWeight is the work, in prompt tokens, of moving
	// one token's KV from the prefill worker to the decode worker.
	DefaultSplitTransferWeight = 0.05
	// DefaultSplitMinTokens is the fewest uncached prompt tokens on the
	// decode worker for which a request is split at all: below it the
	// second leg's round trip costs more than the prefill it moves.
	DefaultSplitMinTokens = 256
	// MaxSplitWeight bounds SplitInterference and SplitTransferWeight.
	MaxSplitWeight = 1000
)

// SplitCost is the split decision's cost model, in tokens of prefill work
// (see Split). It is Config's Split* fields with defaults applied.
type SplitCost struct {
	Interference   float64
	TransferWeight float64
	MinTokens      int
}

// splitCost returns c's cost model with defaults applied; c has been
// validated.
func (c *Config) splitCost() SplitCost {
	s := SplitCost{Interference: c.SplitInterference, TransferWeight: c.SplitTransferWeight, MinTokens: c.SplitMinTokens}
	switch {
	case s.Interference == 0:
		s.Interference = DefaultSplitInterference
	case s.Interference < 0:
		s.Interference = 0
	}
	switch {
	case s.TransferWeight == 0:
		s.TransferWeight = DefaultSplitTransferWeight
	case s.TransferWeight < 0:
		s.TransferWeight = 0
	}
	switch {
	case s.MinTokens == 0:
		s.MinTokens = DefaultSplitMinTokens
	case s.MinTokens < 0:
		s.MinTokens = 0
	}
	return s
}

// validateSplit reports the first invalid Split* field of c.
func (c *Config) validateSplit() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"SplitInterference", c.SplitInterference}, {"SplitTransferWeight", c.SplitTransferWeight}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v > MaxSplitWeight {
			return fmt.Errorf("%s: %v is not a number up to %d", f.name, f.v, MaxSplitWeight)
		}
	}
	if c.SplitMinTokens > MaxCacheTokens {
		return fmt.Errorf("SplitMinTokens: %d is above %d", c.SplitMinTokens, MaxCacheTokens)
	}
	return nil
}

// SplitCost returns the split decision's cost model of r's configuration.
func (r *Router) SplitCost() SplitCost { return r.snap.Load().cfg.splitCost() }

// SplitInput is what the split decision reads about one request: the
// prefix index's predictions for the chosen decode worker and the chosen
// prefill worker.
type SplitInput struct {
	// PromptTokens is the prompt's length in tokens.
	PromptTokens int
	// DecodeMatched is the prompt prefix, in tokens, predicted cached on
	// the decode worker; DecodeQueued the prefill work queued there, in
	// tokens; DecodeLoad the requests it holds besides this one.
	DecodeMatched, DecodeQueued, DecodeLoad int
	// HavePrefill is false when no prefill worker is below its bound.
	HavePrefill bool
	// PrefillMatched and PrefillQueued are the same for the prefill worker.
	PrefillMatched, PrefillQueued int
}

// SplitReason says why a request was split or not.
type SplitReason uint8

const (
	// SplitCheaper: prefilling on the prefill worker and moving the KV
	// costs less than prefilling on the decode worker.
	SplitCheaper SplitReason = iota + 1
	// SplitFewTokens: the decode worker misses fewer than MinTokens of the
	// prompt; it prefills them itself.
	SplitFewTokens
	// SplitDearer: the prefill worker's queue, its own miss and the
	// transfer cost more than the decode worker's prefill and its
	// interference.
	SplitDearer
	// SplitNoPrefill: no prefill worker is below its bound (or none serves
	// the model).
	SplitNoPrefill
)

var splitReasonNames = [...]string{
	SplitCheaper:   "split-cheaper",
	SplitFewTokens: "few-uncached-tokens",
	SplitDearer:    "split-dearer",
	SplitNoPrefill: "no-prefill-worker",
}

func (r SplitReason) String() string {
	if int(r) < len(splitReasonNames) && splitReasonNames[r] != "" {
		return splitReasonNames[r]
	}
	return fmt.Sprintf("split-reason(%d)", uint8(r))
}

// SplitDecision is the outcome of Split.
type SplitDecision struct {
	// Split is true when the prompt is prefilled on the prefill worker and
	// its KV moved to the decode worker; false runs it aggregated on the
	// decode worker.
	Split  bool
	Reason SplitReason
	// Aggregated and Disaggregated are the two predicted costs in tokens
	// of work (0 when the decision did not need them).
	Aggregated, Disaggregated int64
	// Transfer is the tokens whose KV the decode worker lacks: what a
	// split moves.
	Transfer int
	// In is what the decision read.
	In SplitInput
}

// String says what was decided and why, with the figures, for Explain.
func (d SplitDecision) String() string {
	in := d.In
	verdict := "aggregated"
	if d.Split {
		verdict = "split"
	}
	switch d.Reason {
	case SplitFewTokens:
		return fmt.Sprintf("%s (%s): %d of %d prompt tokens uncached on the decode worker", verdict, d.Reason, d.Transfer, in.PromptTokens)
	case SplitNoPrefill:
		return fmt.Sprintf("%s (%s): %d prompt tokens uncached on the decode worker", verdict, d.Reason, d.Transfer)
	}
	return fmt.Sprintf("%s (%s): aggregated costs %d tokens of work (%d uncached with %d decoding there, %d queued), split %d (%d uncached on the prefill worker, %d queued, %d to transfer)",
		verdict, d.Reason, d.Aggregated, d.Transfer, in.DecodeLoad, in.DecodeQueued, d.Disaggregated, max(0, in.PromptTokens-in.PrefillMatched), in.PrefillQueued, d.Transfer)
}

// Split decides whether a request runs aggregated on its decode worker or
// is split: prefilled on the prefill worker, its KV moved to the decode
// worker. In tokens of prefill work, with u the prompt tokens uncached on
// the decode worker, b the requests decoding there, q its queued prefill,
// and u′, q′ the same on the prefill worker:
//
//	aggregated = q + u·(1 + Interference·b)
//	split      = q′ + u′ + TransferWeight·u
//
// The first is the request's own wait and prefill on the decode worker
// plus what its prefill chunks take from every step of the b requests
// decoding beside it; the second is its wait and prefill on the prefill
// worker plus moving the KV the decode worker lacks. It splits when the
// second is smaller and u is at least MinTokens. Split allocates nothing.
func (c SplitCost) Split(in SplitInput) SplitDecision {
	u := max(0, in.PromptTokens-in.DecodeMatched)
	d := SplitDecision{Transfer: u, In: in}
	switch {
	case u < c.MinTokens || u == 0:
		d.Reason = SplitFewTokens
		return d
	case !in.HavePrefill:
		d.Reason = SplitNoPrefill
		return d
	}
	b := float64(max(0, in.DecodeLoad))
	agg := float64(max(0, in.DecodeQueued)) + float64(u)*(1+c.Interference*b)
	up := max(0, in.PromptTokens-in.PrefillMatched)
	split := float64(max(0, in.PrefillQueued)) + float64(up) + c.TransferWeight*float64(u)
	d.Aggregated, d.Disaggregated = int64(math.Round(agg)), int64(math.Round(split))
	d.Split = split < agg
	d.Reason = SplitDearer
	if d.Split {
		d.Reason = SplitCheaper
	}
	return d
}

// Probe is a dry run's prediction for one member: where a request would go
// and what the prefix index predicts there, nothing charged.
type Probe struct {
	Backend string
	// MatchedTokens is the prompt prefix predicted cached there.
	MatchedTokens int
	// QueuedTokens is the prefill work queued there, in tokens (prefix-index
	// only, else 0).
	QueuedTokens int
	// Load is the requests it holds (with load hints).
	Load int
}

// Probe runs the policy as a dry run, like Explain, but records nothing:
// where req would go now and the prediction there. It fails as TryPick
// does, with ErrSaturated itself rather than a *SaturatedError.
func (r *Router) Probe(req Request) (Probe, error) {
	s := r.snap.Load()
	n := s.candidates(req.Model)
	if n == 0 {
		return Probe{}, s.noCandidates(req.Model)
	}
	e := pickEnv{r: r, s: s, n: n, bound: s.bound(r.total.Load()+r.hints.Load()+1, n), dry: true}
	res := dispatch(&e, &req)
	switch res.status {
	case saturated:
		return Probe{}, ErrSaturated
	case noCandidates:
		return Probe{}, s.noCandidates(req.Model)
	}
	m := &s.members[res.idx]
	return Probe{Backend: m.name, MatchedTokens: res.tokens, QueuedTokens: int(queuedOf(req.PromptTokens, res.tokens, res.cost)), Load: int(m.st.load())}, nil
}

// queuedOf recovers the queued work from a prefix-index cost
// (missWeight × uncached + queued).
func queuedOf(promptTokens, matched int, cost int64) int64 {
	return max(0, cost-missWeight*int64(max(0, promptTokens-matched)))
}

// SplitPick is where both legs of a request go.
type SplitPick struct {
	// Decode is the decode worker's pick; it serves the request either way.
	Decode Decision
	// Prefill is the prefill worker's pick when Split.Split, else zero.
	Prefill Decision
	Split   SplitDecision
}

// Done releases both legs' picks.
func (p *SplitPick) Done() {
	p.Decode.Done()
	p.Prefill.Done()
}

// PickSplit routes both legs of a request: the decode worker by decode's
// policy over its members (the decode pool) under its bound, then, unless
// too little of the prompt is uncached there, the prefill worker by
// prefill's over the prefill pool under its own, and decides with
// decode's SplitCost whether to split. When split, the decode pick's
// prefill charge is released at once (the decode worker imports the KV
// rather than computing it). A prefill pool that is full or down makes the
// request aggregated, never an error; errors are the decode pick's
// (Router.Pick). prefill may be nil (no prefill pool).
func PickSplit(ctx context.Context, decode, prefill *Router, req Request) (SplitPick, error) {
	d, err := decode.Pick(ctx, req)
	if err != nil {
		return SplitPick{}, err
	}
	return splitAfter(d, decode, prefill, &req), nil
}

// TryPickSplit is PickSplit without waiting for capacity (Router.TryPick),
// for a simulator running in virtual time.
func TryPickSplit(decode, prefill *Router, req Request) (SplitPick, error) {
	d, err := decode.TryPick(req)
	if err != nil {
		return SplitPick{}, err
	}
	return splitAfter(d, decode, prefill, &req), nil
}

// splitAfter decides the split for a request whose decode pick is d.
func splitAfter(d Decision, decode, prefill *Router, req *Request) SplitPick {
	cost := decode.SplitCost()
	in := SplitInput{
		PromptTokens:  req.PromptTokens,
		DecodeMatched: d.MatchedTokens,
		DecodeQueued:  int(queuedOf(req.PromptTokens, d.MatchedTokens, int64(d.Cost))),
		DecodeLoad:    d.Load - 1,
	}
	out := SplitPick{Decode: d}
	if req.PromptTokens-d.MatchedTokens >= cost.MinTokens && prefill != nil {
		if p, err := prefill.Probe(*req); err == nil {
			in.HavePrefill, in.PrefillMatched, in.PrefillQueued = true, p.MatchedTokens, p.QueuedTokens
		}
	}
	out.Split = cost.Split(in)
	if !out.Split.Split {
		return out
	}
	p, err := prefill.TryPick(*req)
	if err != nil {
		// Filled between the probe and the pick.
		out.Split.Split, out.Split.Reason = false, SplitNoPrefill
		return out
	}
	out.Prefill = p
	out.Decode.Report(Outcome{FirstByte: true})
	return out
}

// SplitExplanation is ExplainSplit's answer: both legs' dry runs and the
// decision they lead to.
type SplitExplanation struct {
	Decode, Prefill Explanation
	Split           SplitDecision
}

// ExplainSplit is PickSplit as a dry run: where each leg would go now, and
// whether the request would be split and why. Nothing is charged.
func ExplainSplit(decode, prefill *Router, req Request) SplitExplanation {
	x := SplitExplanation{Decode: decode.Explain(req)}
	in := SplitInput{PromptTokens: req.PromptTokens}
	if c, ok := chosenCost(&x.Decode); ok {
		in.DecodeMatched = c.MatchedTokens
		in.DecodeQueued = int(queuedOf(req.PromptTokens, c.MatchedTokens, int64(c.Cost)))
		in.DecodeLoad = c.Load
	}
	if prefill != nil {
		x.Prefill = prefill.Explain(req)
		if x.Prefill.Err == nil {
			in.HavePrefill = true
			if c, ok := chosenCost(&x.Prefill); ok {
				in.PrefillMatched = c.MatchedTokens
				in.PrefillQueued = int(queuedOf(req.PromptTokens, c.MatchedTokens, int64(c.Cost)))
			}
		}
	}
	x.Split = decode.SplitCost().Split(in)
	return x
}

// chosenCost is the explanation's prediction for its chosen backend.
func chosenCost(x *Explanation) (CandidateCost, bool) {
	for _, c := range x.Costs {
		if c.Backend == x.Backend && x.Backend != "" {
			return c, true
		}
	}
	return CandidateCost{}, false
}
