package route

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrSaturated matches (errors.Is) every *SaturatedError.
	ErrSaturated = errors.New("route: all candidates saturated")
	// ErrNoCandidates means no healthy member serves the requested model,
	// though some member out of the candidate set (ejected, draining) does:
	// the fleet is down for it, and a later try may succeed.
	ErrNoCandidates = errors.New("route: no healthy backend serves the model")
	// ErrUnknownModel means no member lists the requested model, healthy or
	// not: the request names a model the fleet does not serve, and trying
	// again will not help. It does not match ErrNoCandidates.
	ErrUnknownModel = errors.New("route: no backend serves the model")
)

// SaturatedError reports that every candidate was at its threshold for as
// long as the request could wait, or that the wait queue was full. Servers
// answer it with 429 / RESOURCE_EXHAUSTED and Retry-After.
type SaturatedError struct {
	// RetryAfter is a hint for the client's next attempt.
	RetryAfter time.Duration
	// Waited is how long the request waited in the queue.
	Waited time.Duration
	// QueueFull is true when the request was refused without waiting
	// because the queue was at its depth (or waiting is disabled).
	QueueFull bool
	// Candidates is the number of candidates that were all full.
	Candidates int
	// Model is the requested model, empty for any.
	Model string
}

func (e *SaturatedError) Error() string {
	if e.QueueFull {
		return fmt.Sprintf("route: all %d candidates for model %q saturated and wait queue full; retry after %v", e.Candidates, e.Model, e.RetryAfter)
	}
	return fmt.Sprintf("route: all %d candidates for model %q saturated after waiting %v; retry after %v", e.Candidates, e.Model, e.Waited, e.RetryAfter)
}

// Is makes errors.Is(err, ErrSaturated) true.
func (e *SaturatedError) Is(target error) bool { return target == ErrSaturated }

// Request is what routing needs to know about a request.
type Request struct {
	// Key is the routing key of the stable prefix (package normalize).
	Key uint64
	// SpillKeys are keys of the same routing text over growing windows, in
	// the order to try their homes when Key's home is full. May be empty.
	SpillKeys []uint64
	// Model is the model or LoRA adapter; empty matches every member.
	Model string
	// Blocks are chained hashes of the fixed-size blocks of the whole
	// prompt's routing text (normalize.RouteInfo.Blocks): Blocks[i] stands
	// for the prompt up to the end of block i, so two prompts share their
	// first k blocks exactly when they share that prefix. Only a policy
	// that says it reads them does (Router.NeedsBlocks); empty routes by
	// Key alone. The router does not keep the slice past the pick.
	Blocks []uint64
	// PromptTokens estimates the prompt's length in tokens (characters/4).
	PromptTokens int
}

// Decision is where a request goes and why. It is a plain value: a pick
// allocates nothing. Call Done exactly when the request finishes (defer
// d.Done() right after a successful Pick); extra calls, from any copy and any
// goroutine, do nothing.
type Decision struct {
	// Backend is the chosen member's name.
	Backend string
	// Member is the chosen member itself, as its owner supplied it: the
	// caller forwards to it even if it has left the set since the pick.
	Member Target
	// Home is the key's owner among candidates ignoring load (ring
	// policies); empty for least-outstanding and random.
	Home string
	// Reason says why Backend was chosen.
	Reason Reason
	// Distance is how far from home: for ReasonSpill the chosen backend's
	// place among the distinct candidates clockwise after home (1 = the next;
	// members already tried by the spill chain are not counted), for
	// ReasonSpillChain the 1-based index of the spill key used; 0 otherwise.
	Distance int
	// Queued is how long the request waited for capacity; 0 if it did not.
	Queued time.Duration
	// Load is Backend's in-flight count right after this pick, including it.
	Load int
	// Bound is the load bound in force for this pick (the smaller of the
	// bounded-load limit and Backend's threshold); 0 when the policy has none.
	Bound int
	// MatchedTokens is how many leading prompt tokens the prefix index
	// predicts Backend holds (prefix-index only, else 0).
	MatchedTokens int
	// Cost is the predicted work of the pick in prompt tokens: uncached
	// prefill plus Backend's queued work (prefix-index only, else 0).
	Cost int

	rel release
}

// release is a ticket for a slot: Done wins the slot's generation with one
// CAS, so exactly one Done per pick releases, even across copies of the
// Decision and after the slot is reused by a later pick (its generation has
// moved on, so a stale ticket's CAS fails).
type release struct {
	slot *releaseSlot
	gen  uint64
}

type releaseSlot struct {
	// state is gen<<3 | flags: the generation advances at Done, the flags
	// say which one-time effects of Report already ran for it.
	state atomic.Uint64
	st    *memberState
	r     *Router
	// What the pick charged and, when its policy learns from outcomes,
	// predicted (zero otherwise).
	learner outcomeLearner
	prefill int64    // tokens added to st.prefill
	matched int      // blocks predicted held
	blocks  int      // blocks of the request
	sampled []uint32 // the index entries held for the prompt's samples
}

const (
	flagPrefill  = 1 << iota // the prefill charge was released
	flagFeedback             // CachedTokens was compared
	flagLearn                // Outcome.Blocks were learned
	flagBits     = 3
)

// setFlag claims effect f for generation gen; false if it already ran or
// the pick is done.
func (s *releaseSlot) setFlag(gen, f uint64) bool {
	for {
		old := s.state.Load()
		if old>>flagBits != gen || old&f != 0 {
			return false
		}
		if s.state.CompareAndSwap(old, old|f) {
			return true
		}
	}
}

// slots recycles release slots; a slot is in the pool only between a Done
// and the next pick, never while a Decision can still win it.
var slots = sync.Pool{New: func() any { return new(releaseSlot) }}

// Outcome is what became of a picked request, handed back through
// DoneWith so that what the router learns from it has one home (as
// grpc-go's balancer.DoneInfo does for its pickers).
type Outcome struct {
	// Err is the forwarding error, nil when the backend answered.
	Err error
	// FirstByte is true once the backend's first response byte arrived.
	FirstByte bool
	// Status is the backend's HTTP status, 0 when no answer came back.
	Status int
	// PromptTokens and CachedTokens are the backend's reported usage
	// (usage.prompt_tokens and usage.prompt_tokens_details.cached_tokens or
	// the engine's equivalent); -1 when the response did not say. Feedback
	// needs both: PromptTokens > 0 and CachedTokens >= 0.
	PromptTokens, CachedTokens int
	// Blocks, if set, are what the backend holds once it has answered: the
	// request's Blocks followed by the blocks of the generated text, hashed
	// as the next turn's prompt will be (the answer becomes its prefix).
	// The prefix index learns them for the chosen member.
	Blocks []uint64
}

// Report tells the router what is known of the request so far without
// ending it: FirstByte (or Err) releases the prefill work charged at the
// pick; reported usage is compared with the prediction (see DoneWith);
// Blocks are learned. Each effect happens at most once per pick, so a
// Report at the first byte and a DoneWith at the end may carry the same
// fields. Call it before Done, from the goroutine that calls Done or one
// ordered before it; after Done it does nothing.
func (d *Decision) Report(o Outcome) {
	s := d.rel.slot
	if s == nil {
		return
	}
	gen := d.rel.gen
	if s.state.Load()>>flagBits != gen {
		// Done already: the slot may be a later pick's by now, its fields
		// being written, so none of them is read.
		return
	}
	if (o.FirstByte || o.Err != nil) && s.setFlag(gen, flagPrefill) {
		s.st.prefill.Add(-s.prefill)
	}
	if s.learner == nil {
		return
	}
	if o.Err == nil && o.PromptTokens > 0 && o.CachedTokens >= 0 && s.setFlag(gen, flagFeedback) {
		s.learner.feedback(s.st.id, s.matched, s.blocks, o.CachedTokens, o.PromptTokens)
	}
	if o.Err == nil && len(o.Blocks) > 0 && s.setFlag(gen, flagLearn) {
		s.learner.learn(s.st.id, o.Blocks, s.sampled)
	}
}

// DoneWith is Done with the request's outcome: it does what Report does,
// then Done. With prefix-index, when the backend reports fewer cached
// tokens than the index predicted (beyond block rounding), the index
// forgets as many of that member's least recently used blocks (its cache
// holds less than the index thought) and counts a misprediction. Then, if
// the member is an Observer, it hands it the outcome's error and status,
// so that passive health is judged from the same outcome that releases the
// in-flight count and feeds the index. Like Done it is idempotent: only
// the first of Done and DoneWith counts, and Done observes nothing.
func (d *Decision) DoneWith(o Outcome) {
	d.Report(o)
	if !d.release() {
		return
	}
	if obs, ok := d.Member.(Observer); ok {
		obs.Observe(o.Err, o.Status)
	}
}

// Done releases the request's in-flight slot. It is idempotent and safe to
// call from several goroutines; the zero Decision's Done does nothing.
func (d *Decision) Done() { d.release() }

// release is Done, reporting whether this call was the one that released.
func (d *Decision) release() bool {
	s := d.rel.slot
	if s == nil {
		return false
	}
	var old uint64
	for {
		old = s.state.Load()
		if old>>flagBits != d.rel.gen {
			return false
		}
		if s.state.CompareAndSwap(old, (d.rel.gen+1)<<flagBits) {
			break
		}
	}
	st, r, prefill := s.st, s.r, s.prefill
	s.st, s.r, s.learner, s.prefill, s.sampled = nil, nil, nil, 0, s.sampled[:0]
	slots.Put(s)
	if old&flagPrefill == 0 && prefill != 0 {
		st.prefill.Add(-prefill)
	}
	st.inflight.Add(-1)
	st.done.Add(1)
	r.total.Add(-1)
	if r.waiters.Load() > 0 {
		r.wakeWaiters()
	}
	return true
}

// Released reports whether Done has run for this pick.
func (d *Decision) Released() bool {
	return d.rel.slot == nil || d.rel.slot.state.Load()>>flagBits != d.rel.gen
}

type pickStatus uint8

const (
	picked pickStatus = iota
	saturated
	noCandidates
)

// result is what a policy returns.
type result struct {
	status pickStatus
	idx    int32 // chosen member
	home   int32 // home member, -1 if none
	reason Reason
	dist   int
	load   int64
	bound  int64
	// prefix-index: the predicted matched tokens and cost.
	tokens int
	cost   int64
}

// TryPick picks a backend without waiting: when every candidate is full it
// fails at once with a *SaturatedError (QueueFull false, Waited 0). It is
// what a discrete-event simulator running in virtual time calls.
func (r *Router) TryPick(req Request) (Decision, error) {
	d, n, err := r.tryPick(&req)
	if err == ErrSaturated {
		err = r.saturated(&req, n, false, 0)
	}
	return d, err
}

// Pick picks a backend, waiting in the bounded queue for up to
// Config.QueueWait when every candidate is full. It fails with
// ErrNoCandidates, a *SaturatedError, or ctx's error; it never waits past ctx
// or QueueWait.
func (r *Router) Pick(ctx context.Context, req Request) (Decision, error) {
	d, n, err := r.tryPick(&req)
	if err == ErrSaturated {
		return r.wait(ctx, &req, n)
	}
	return d, err
}

// saturated is the *SaturatedError for req after n candidates were full:
// refused at once (queueFull) or after waiting waited.
func (r *Router) saturated(req *Request, n int, queueFull bool, waited time.Duration) error {
	retry := r.snap.Load().cfg.QueueWait
	if retry <= 0 {
		retry = time.Second
	}
	return &SaturatedError{RetryAfter: retry, Waited: waited, QueueFull: queueFull, Candidates: n, Model: strings.Clone(req.Model)}
}

// wait is the slow path: queue until a Done (or a membership or health
// change) may have freed capacity, then try again.
func (r *Router) wait(ctx context.Context, req *Request, n int) (Decision, error) {
	cfg := r.snap.Load().cfg
	if cfg.QueueDepth < 0 || cfg.QueueWait < 0 {
		return Decision{}, r.saturated(req, n, true, 0)
	}
	if r.waiters.Add(1) > int64(cfg.QueueDepth) {
		r.waiters.Add(-1)
		return Decision{}, r.saturated(req, n, true, 0)
	}
	defer r.waiters.Add(-1)
	start := time.Now()
	timer := time.NewTimer(cfg.QueueWait)
	defer timer.Stop()
	for {
		// Take the wake channel before trying: a Done that frees capacity
		// after our try closes this channel (we are counted in waiters), so
		// no wake-up is lost.
		wake := *r.wake.Load()
		d, m, err := r.tryPick(req)
		if err != ErrSaturated {
			if err == nil {
				d.Queued = time.Since(start)
			}
			return d, err
		}
		n = m
		select {
		case <-wake:
		case <-timer.C:
			return Decision{}, r.saturated(req, n, false, time.Since(start))
		case <-ctx.Done():
			return Decision{}, fmt.Errorf("route: waiting for capacity: %w", context.Cause(ctx))
		}
	}
}

// noCandidates is the error for a request with no candidate:
// ErrUnknownModel when no member lists model whatever its health, else
// ErrNoCandidates. It runs on the error path only, so it scans.
func (s *snapshot) noCandidates(model string) error {
	if model != "" && len(s.members) > 0 && !slices.ContainsFunc(s.members, func(m memberView) bool { return m.serves(model) }) {
		return ErrUnknownModel
	}
	return ErrNoCandidates
}

// tryPick is the lock-free, allocation-free fast path shared by Pick and
// TryPick. It returns the number of candidates for error messages, and
// ErrSaturated itself (not a *SaturatedError) when every candidate is full.
func (r *Router) tryPick(req *Request) (Decision, int, error) {
	s := r.snap.Load()
	n := s.candidates(req.Model)
	if n == 0 {
		return Decision{}, 0, s.noCandidates(req.Model)
	}
	// Reserve this request in the total first: the bound is computed from a
	// total that already counts it, and every concurrent pick's reservation
	// is visible to the others, so two picks can never both see room that
	// only one of them may take (see acquire).
	total := r.total.Add(1)
	e := pickEnv{r: r, s: s, n: n, bound: s.bound(total+r.hints.Load(), n)}
	res := dispatch(&e, req)
	if res.status != picked {
		r.total.Add(-1)
		if res.status == saturated {
			return Decision{}, n, ErrSaturated
		}
		return Decision{}, n, s.noCandidates(req.Model)
	}
	if e.slot == nil { // no prefix-index charge took one
		e.slot = slots.Get().(*releaseSlot)
	}
	return r.decide(s, res, e.slot), n, nil
}

// decide fills slot, a release slot from the pool, for a pick res has
// charged and returns its Decision.
func (r *Router) decide(s *snapshot, res result, slot *releaseSlot) Decision {
	m := &s.members[res.idx]
	slot.st, slot.r = m.st, r
	d := Decision{
		Backend:       m.name,
		Member:        m.t,
		Reason:        res.reason,
		Distance:      res.dist,
		Load:          int(res.load),
		Bound:         int(res.bound),
		MatchedTokens: res.tokens,
		Cost:          int(res.cost),
		rel:           release{slot: slot, gen: slot.state.Load() >> flagBits},
	}
	if res.home >= 0 {
		d.Home = s.members[res.home].name
	}
	return d
}
