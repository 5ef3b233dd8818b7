package server

import (
	"context"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// FlowGate is the server's flow control, which the endpoint picker shares.
func (s *Server) FlowGate() *flowgate.Gate { return s.gate }

// backendSignals is a backend's last scrape, for flow control's
// saturation detector.
func backendSignals(t route.Target) flowgate.Scrape {
	b, ok := t.(*backends.Backend)
	if !ok {
		return flowgate.Scrape{}
	}
	l := b.Load()
	_, _, takes := b.Engine().PriorityField()
	return flowgate.Scrape{Known: l.Known, At: l.ScrapedAt, Running: int(l.Running), Waiting: int(l.Waiting), KVUtil: l.KVCacheUsage,
		TakesPriority: takes}
}

// rescrapeTimeout bounds a scrape flow control asks for.
const rescrapeTimeout = 2 * time.Second

// rescrape scrapes one backend's engine at once, for flow control.
func (s *Server) rescrape(t route.Target) {
	if b, ok := t.(*backends.Backend); ok {
		ctx, cancel := context.WithTimeout(context.Background(), rescrapeTimeout)
		defer cancel()
		s.pool.Rescrape(ctx, b)
	}
}

// identify is the request's flow: the tenant when API keys are
// configured, else the fairness headers, else the group.
func (s *Server) identify(ctx context.Context, hdr http.Header, group string) (flowgate.Identity, error) {
	if !s.gate.Enabled() {
		return flowgate.Identity{}, nil
	}
	tenant := ""
	if s.pipe.TenantsEnabled() {
		tenant = pipeline.TenantFrom(ctx)
	}
	if hdr == nil {
		hdr = http.Header{}
	}
	return s.gate.Identify(hdr, tenant, group)
}

// acquire picks a backend for req through flow control when it is on,
// else through the router's own bounded wait.
func (s *Server) acquire(ctx context.Context, req route.Request, pn pin) (route.Decision, error) {
	if !s.gate.Enabled() {
		return s.rt().Pick(ctx, req)
	}
	d, adm, err := s.gate.Acquire(ctx, pn.flow.Flow, req, pn.bytes)
	if pn.adm != nil {
		*pn.adm = adm
	}
	return d, err
}

// withEnginePriority is body with the request's priority in b's engine's
// own field when flow control sends priorities and the engine takes them.
func (s *Server) withEnginePriority(b *backends.Backend, body []byte, pn pin) []byte {
	field, lowerFirst, takes := b.Engine().PriorityField()
	field, v, ok := s.gate.EnginePriority(field, lowerFirst, takes, pn.flow.Flow.Priority)
	if !ok {
		return body
	}
	out, _ := flowgate.WithPriority(body, field, v)
	return out
}

// outputTokens reads usage.completion_tokens (output_tokens in the
// Responses and Messages APIs, meta_info's in SGLang's native answers) of
// a usage object; 0 when absent.
func outputTokens(usage gjson.Result) int {
	if !usage.IsObject() {
		return 0
	}
	for _, name := range [...]string{"completion_tokens", "output_tokens"} {
		if v := usage.Get(name); v.Type == gjson.Number && v.Num > 0 && v.Num < 1<<40 {
			return int(v.Num)
		}
	}
	return 0
}

// chargeOutput counts the answer's output tokens to its flow.
func (x *exchange) chargeOutput() {
	if x.outTokens > 0 {
		x.s.gate.Charge(x.info.Model, x.flow.Flow, 0, x.outTokens)
	}
}

// plainOutputTokens is outputTokens of a whole answer's usage (or SGLang's
// meta_info).
func plainOutputTokens(body []byte) int {
	if n := outputTokens(gjson.GetBytes(body, "usage")); n > 0 {
		return n
	}
	return outputTokens(gjson.GetBytes(body, "meta_info"))
}

// flowJSON is flow control's part of an explanation.
type flowJSON struct {
	FairnessID string `json:"fairness_id"`
	Priority   int    `json:"priority"`
	Objective  string `json:"objective"`
	Capped     bool   `json:"capped"`
	Saturated  bool   `json:"saturated"`
	// Ahead is the requests of the model queued at the priority or above.
	Ahead  int `json:"ahead"`
	Queued int `json:"queued"`
}

// explainFlow says which flow and band a request would run in, whether it
// would wait, and behind how many; nil when flow control is off.
func (s *Server) explainFlow(r *http.Request, body []byte, mode normalize.Mode, group string, prefixLength int) (*flowJSON, error) {
	if !s.gate.Enabled() {
		return nil, nil
	}
	p, err := s.pipe.Normalize(r.Context(), nil, body, mode, group, prefixLength)
	if err != nil {
		return nil, err
	}
	id, err := s.identify(r.Context(), r.Header, p.Info.Group)
	if err != nil {
		return nil, err
	}
	ex := s.gate.Explain(id, p.RouteRequest())
	return &flowJSON{FairnessID: id.Flow.FairnessID, Priority: id.Flow.Priority, Objective: id.Objective, Capped: id.Capped,
		Saturated: ex.Saturated, Ahead: ex.Ahead, Queued: ex.Queued}, nil
}
