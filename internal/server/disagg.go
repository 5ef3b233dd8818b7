package server

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// PrefillBackendHeader names the prefill worker of a split request's
// answer, beside BackendHeader (the decode worker).
const PrefillBackendHeader = "X-Prefixgate-Prefill-Backend"

// disagg is the prefill side of a disaggregated fleet: a router over the
// backends that take prefill legs, each leg's pick bounded as the main
// router bounds the decode side. The main router holds the backends that
// decode; a fleet that names no role keeps every backend there and splits
// nothing.
type disagg struct {
	cfg     DisaggConfig
	prefill *route.Router
	// active: some backend names a role.
	active  atomic.Bool
	metrics *pdMetrics
}

func newDisagg(s *Server, bs []*backends.Backend) (*disagg, error) {
	r, err := route.NewTargets(s.cfg.Route, prefillTargets(bs))
	if err != nil {
		return nil, err
	}
	pd := &disagg{cfg: s.cfg.Disagg, prefill: r, metrics: newPDMetrics(s.metrics.registry, s)}
	pd.active.Store(backends.HasRoles(bs))
	return pd, nil
}

// decodeTargets are the main router's members: every backend, or in a
// fleet with roles those that decode.
func decodeTargets(bs []*backends.Backend) []route.Target {
	if !backends.HasRoles(bs) {
		return targets(bs)
	}
	var ts []route.Target
	for _, b := range bs {
		if b.Role().Decodes() {
			ts = append(ts, b)
		}
	}
	return ts
}

// prefillTargets are the prefill router's members: in a fleet with roles
// the backends that prefill, else none.
func prefillTargets(bs []*backends.Backend) []route.Target {
	var ts []route.Target
	if !backends.HasRoles(bs) {
		return ts
	}
	for _, b := range bs {
		if b.Role().Prefills() {
			ts = append(ts, b)
		}
	}
	return ts
}

// setMembers follows a membership change.
func (pd *disagg) setMembers(bs []*backends.Backend) error {
	pd.active.Store(backends.HasRoles(bs))
	return pd.prefill.SetTargets(prefillTargets(bs))
}

// explainSplit says, for a generation request of a disaggregated fleet,
// whether it would be split now, onto which prefill worker, and why (a
// sentence with the cost model's figures); all empty otherwise.
func (s *Server) explainSplit(req route.Request, mode normalize.Mode) (verdict, prefill, why string) {
	if s.pd == nil || !s.pd.active.Load() || (mode != normalize.ModeChat && mode != normalize.ModeCompletion) {
		return "", "", ""
	}
	x := route.ExplainSplit(s.rt(), s.pd.prefill, req)
	split := x.Split.Split
	why = "prefill/decode: " + x.Split.String()
	if s.pd.cfg.Split == SplitAlways {
		split = x.Prefill.Err == nil && x.Prefill.Backend != ""
		why = "prefill/decode (disaggregation.split always): split while a prefill worker has room"
		if !split {
			why = "prefill/decode (disaggregation.split always): aggregated, no prefill worker has room"
		}
	}
	if split && x.Prefill.Backend == x.Decode.Backend {
		split, why = false, "prefill/decode: aggregated, the prefill pick is the decode worker itself"
	}
	if !split {
		return "aggregated", "", why
	}
	return "split", x.Prefill.Backend, why + "; prefill on " + x.Prefill.Backend
}

// prefillOnly is the status of the prefill router's members that are not
// the main router's (role prefill).
func (pd *disagg) prefillOnly() []route.MemberStatus {
	var out []route.MemberStatus
	for _, st := range pd.prefill.Status() {
		if b, ok := st.Member.(*backends.Backend); ok && !b.Role().Decodes() {
			out = append(out, st)
		}
	}
	return out
}

// splittable reports whether a request to path may run split: the
// generation paths both engines serve in their disaggregated modes.
func splittable(path string) bool {
	switch path {
	case "/v1/chat/completions", "/v1/completions", "/generate":
		return true
	}
	return false
}

// protocol is the wire protocol of a split whose prefill leg goes to b.
func (pd *disagg) protocol(b *backends.Backend) string {
	if pd.cfg.Protocol != ProtocolAuto {
		return pd.cfg.Protocol
	}
	if b.Engine() == backends.EngineSGLang {
		return ProtocolSGLang
	}
	return ProtocolVLLM
}

// bootstrapPort is where b's SGLang bootstrap server listens: the
// configured port, else the one b's server info states, else SGLang's
// default; with -1 b's own HTTP port.
func (pd *disagg) bootstrapPort(b *backends.Backend) int {
	switch {
	case pd.cfg.BootstrapPort > 0:
		return pd.cfg.BootstrapPort
	case pd.cfg.BootstrapPort == 0 && b.BootstrapPort() > 0:
		return b.BootstrapPort()
	case pd.cfg.BootstrapPort == 0:
		return DefaultBootstrapPort
	}
	if p, err := strconv.Atoi(b.URL.Port()); err == nil {
		return p
	}
	if b.URL.Scheme == "https" {
		return 443
	}
	return 80
}

// pdLegs is what a request's split leaves to its exchange: the decision,
// and for SGLang the prefill twin still running beside the decode leg.
type pdLegs struct {
	split  bool
	reason string
	// prefill is the prefill worker's pick; released when its leg ends.
	prefill route.Decision
	// twin ends the SGLang prefill twin's context; done closes when it
	// has ended and its pick is released. nil for vLLM's two phases.
	twin   context.CancelFunc
	done   chan struct{}
	decode context.CancelFunc
	header [1]string
}

// twinGrace is how long a finished decode leg waits for its SGLang
// prefill twin's answer before ending it: the twin answers once the KV
// has moved, which is before the decode's first token.
const twinGrace = time.Second

// close ends the legs: a decode that failed aborts its SGLang prefill
// twin at once; one that succeeded lets it answer for up to twinGrace.
func (l *pdLegs) close(failed bool) {
	if l.done != nil {
		if !failed {
			t := time.NewTimer(twinGrace)
			select {
			case <-l.done:
			case <-t.C:
			}
			t.Stop()
		}
		l.twin()
		<-l.done
	}
	if l.decode != nil {
		l.decode()
	}
}

// dispatchPD is dispatch for a fleet with roles: the decode worker is
// picked by the main router, the decision says whether the request runs
// split, and if so the prefill worker is picked by the prefill router and
// both legs are sent in the pool's protocol. Without roles, for a request
// pinned by a stored response or a path that does not split, it is
// dispatch.
func (s *Server) dispatchPD(ctx context.Context, path string, p pipeline.Prepared, hdr http.Header, lease *bodyLease, d *route.Decision, pn pin) (*http.Response, *pdLegs, error) {
	if s.pd == nil || !s.pd.active.Load() || pn.stored != "" || !splittable(path) {
		resp, err := s.dispatch(ctx, path, p, hdr, lease, d, pn)
		return resp, nil, err
	}
	req := p.RouteRequest()
	start := time.Now()
	sp, err := s.pd.pickPinned(ctx, s.rt(), req, pn.backend, func(ctx context.Context, req route.Request) (route.Decision, error) {
		return s.acquire(ctx, req, pn)
	})
	if err != nil {
		s.pipe.ObservePick(time.Since(start), nil)
		return nil, nil, s.pipe.PickError(err, p.Info.Model)
	}
	*d = sp.Decode
	legs := &pdLegs{split: sp.Split.Split, reason: sp.Split.Reason.String(), prefill: sp.Prefill}
	if s.pd.cfg.Split == SplitAlways && legs.split {
		legs.reason = SplitAlways
	}
	s.pipe.ObservePick(time.Since(start), d)
	if pn.session != "" {
		s.sessions.Put(pn.session, d.Backend)
	}
	if legs.split {
		resp, err, out := s.runSplit(ctx, path, p, hdr, d, legs)
		switch {
		case out == prefillFailed:
			legs.reason = "prefill-failed"
		case out == decodeRefused:
			legs.reason = "decode-failed"
		case err != nil:
			// The decode leg sent nothing back: the request goes where
			// dispatch sends it, whole, as any request whose backend
			// failed.
			s.pd.metrics.requests.WithLabelValues("aggregated", "decode-failed").Inc()
			if s.retryable(ctx, err) {
				resp, err := s.dispatch(ctx, path, p, hdr, lease, d, pn)
				return resp, nil, err
			}
			return nil, nil, upstreamError(err)
		default:
			s.pd.metrics.requests.WithLabelValues("split", legs.reason).Inc()
			return resp, legs, nil
		}
		legs.split = false
	}
	s.pd.metrics.requests.WithLabelValues("aggregated", legs.reason).Inc()
	resp, err := s.forwardAggregated(ctx, path, p, hdr, lease, d, pn)
	return resp, nil, err
}

// pick routes both legs of a request: the decode worker by the main
// router, and, when the decision splits it, the prefill worker by the
// prefill router (route.PickSplit). With Split "always" every request is
// split while a prefill worker has room. A prefill pick that lands on the
// decode worker itself (a backend of role both) runs aggregated.
//
// acquire picks the decode worker (Server.acquire: through flow control
// when it is on); nil picks it with decode.Pick.
func (pd *disagg) pick(ctx context.Context, decode *route.Router, req route.Request, acquire func(context.Context, route.Request) (route.Decision, error)) (route.SplitPick, error) {
	if acquire == nil {
		acquire = decode.Pick
	}
	d, err := acquire(ctx, req)
	if err != nil {
		return route.SplitPick{}, err
	}
	if pd.cfg.Split == SplitAlways {
		return pd.always(d, req), nil
	}
	sp := route.SplitFor(d, decode, pd.prefill, req)
	sameWorker(&sp)
	return sp, nil
}

// always is the split of Split "always" for a request picked onto d.
func (pd *disagg) always(d route.Decision, req route.Request) route.SplitPick {
	sp := route.SplitPick{Decode: d, Split: route.SplitDecision{Reason: route.SplitNoPrefill}}
	if p, err := pd.prefill.TryPick(req); err == nil {
		sp.Prefill, sp.Split = p, route.SplitDecision{Split: true, Reason: route.SplitCheaper}
		sp.Decode.Report(route.Outcome{FirstByte: true}) // the decode worker imports the prefill
	}
	sameWorker(&sp)
	return sp
}

// pickPinned is pick for a request whose session names its decode worker
// (member; "" for none): that worker while it is healthy and below its
// bound, else the policy's, with the prefill placed and the split decided
// as for any request.
func (pd *disagg) pickPinned(ctx context.Context, decode *route.Router, req route.Request, member string,
	acquire func(context.Context, route.Request) (route.Decision, error)) (route.SplitPick, error) {
	if member == "" {
		return pd.pick(ctx, decode, req, acquire)
	}
	d, err := decode.PickMember(member, req, true)
	if err != nil {
		return pd.pick(ctx, decode, req, acquire)
	}
	if pd.cfg.Split == SplitAlways {
		return pd.always(d, req), nil
	}
	sp := route.SplitFor(d, decode, pd.prefill, req)
	sameWorker(&sp)
	return sp, nil
}

// sameWorker undoes a split whose two legs landed on one backend.
func sameWorker(sp *route.SplitPick) {
	if sp.Split.Split && sp.Prefill.Backend == sp.Decode.Backend {
		sp.Prefill.Done()
		sp.Prefill, sp.Split.Split, sp.Split.Reason = route.Decision{}, false, route.SplitNoPrefill
	}
}

// forwardAggregated sends the request as it is to d's backend: the aggregated
// case. When nothing comes back it goes to dispatch, which picks again and
// retries as for any request.
func (s *Server) forwardAggregated(ctx context.Context, path string, p pipeline.Prepared, hdr http.Header, lease *bodyLease, d *route.Decision, pn pin) (*http.Response, error) {
	b := d.Member.(*backends.Backend)
	fctx := ctx
	if s.pool.HoldsBody(b, len(p.Body)) {
		fctx = httptrace.WithClientTrace(ctx, lease.trace())
	}
	sent := time.Now()
	resp, err := s.pool.Forward(fctx, b, http.MethodPost, path, p.Body, hdr)
	if err != nil {
		d.DoneWith(failedOutcome(err))
		if s.retryable(ctx, err) {
			return s.dispatch(ctx, path, p, hdr, lease, d, pn)
		}
		return nil, upstreamError(err)
	}
	s.metrics.firstByte(b.Name).Observe(time.Since(sent).Seconds())
	s.pipe.CountSpill(d)
	return resp, nil
}

// retryable reports whether a request whose backend failed with err may
// go to another, as dispatch decides it.
func (s *Server) retryable(ctx context.Context, err error) bool {
	var ue *backends.UnreachableError
	return errors.As(err, &ue) && ctx.Err() == nil && (!ue.Sent || *s.cfg.RetrySent) && *s.cfg.Retries > 0
}

// isCanceled reports whether err is a context's end.
func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// newRooms draws n SGLang bootstrap rooms (1 for a single input): random
// 63-bit integers, as SGLang's own load balancer draws them.
func newRooms(n int) []uint64 {
	rooms := make([]uint64, max(n, 1))
	for i := range rooms {
		rooms[i] = rand.Uint64() >> 1
	}
	return rooms
}
