package epp

import (
	"context"

	"github.com/prefixgate/prefixgate/route"
)

// PrefillerHeader names the prefill worker of a split request, host:port,
// on the request the gateway sends to the decode worker: llm-d's routing
// sidecar beside the decode worker reads it, sends the prefill leg there
// and then the decode leg to its own worker.
const PrefillerHeader = "x-prefiller-host-port"

// Splitter is a fleet whose backends name roles (prefill+URL,
// decode+URL): the HTTP server is one.
type Splitter interface {
	// Disaggregated reports whether some backend names a role.
	Disaggregated() bool
	// PickSplit picks the decode worker and, when the request is split,
	// the prefill worker (route.PickSplit under the fleet's settings).
	// acquire picks the decode worker (flow control); nil: the router's
	// own bounded wait.
	PickSplit(ctx context.Context, req route.Request, acquire func(context.Context, route.Request) (route.Decision, error)) (route.SplitPick, error)
}

// splitter is the fleet's Splitter when the request may be split: a
// generation request of a disaggregated fleet, placed by the policy alone
// (no stored response, session or subset hint pins it).
func (x *exchange) splitter() (Splitter, bool) {
	s, ok := x.p.fleet.(Splitter)
	if !ok || !s.Disaggregated() || x.pin != "" || x.session != "" || x.hinted {
		return nil, false
	}
	switch x.path {
	case "/v1/chat/completions", "/v1/completions":
		return s, true
	}
	return nil, false
}

// pickSplit picks both legs: the decode worker is the destination, the
// prefill worker (when split) is kept for PrefillerHeader and released
// when the decode worker's answer begins.
func (x *exchange) pickSplit(ctx context.Context, s Splitter) (route.Decision, error) {
	var acquire func(context.Context, route.Request) (route.Decision, error)
	if x.flowOn {
		acquire = func(ctx context.Context, req route.Request) (route.Decision, error) {
			d, _, err := x.p.gate().Acquire(ctx, x.flow.Flow, req, len(x.body))
			return d, err
		}
	}
	sp, err := s.PickSplit(ctx, x.req, acquire)
	if err != nil {
		return route.Decision{}, x.p.pipe.PickError(err, x.req.Model)
	}
	if sp.Split.Split {
		x.prefill, x.prefillPicked = sp.Prefill, true
	}
	x.p.metrics.splits.WithLabelValues(strconvBool(sp.Split.Split), sp.Split.Reason.String()).Inc()
	return sp.Decode, nil
}

// releasePrefill releases the prefill worker's pick once: its leg ended
// before the decode worker answered (status), or the exchange ended
// without an answer (status 0).
func (x *exchange) releasePrefill(status int) {
	if !x.prefillPicked || x.prefill.Released() {
		return
	}
	o := route.Outcome{FirstByte: status != 0, Status: status, PromptTokens: -1, CachedTokens: -1}
	if status != 0 && status < 500 {
		o.Blocks = x.req.Blocks // the prefill worker holds the prompt
	}
	x.prefill.DoneWith(o)
}

func strconvBool(b bool) string {
	if b {
		return "split"
	}
	return "aggregated"
}
