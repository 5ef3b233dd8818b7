package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/backends"
	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// normalizeService implements prefixgate.v1.NormalizeService.
type normalizeService struct{ s *Server }

// modeProtos is each normalize.Mode's proto value, by Mode.
var modeProtos = [...]pb.RequestMode{
	normalize.ModeAuto:       pb.RequestMode_REQUEST_MODE_UNSPECIFIED,
	normalize.ModeChat:       pb.RequestMode_REQUEST_MODE_CHAT,
	normalize.ModeCompletion: pb.RequestMode_REQUEST_MODE_COMPLETION,
	normalize.ModeNative:     pb.RequestMode_REQUEST_MODE_NATIVE,
	normalize.ModeResponses:  pb.RequestMode_REQUEST_MODE_RESPONSES,
	normalize.ModeMessages:   pb.RequestMode_REQUEST_MODE_MESSAGES,
	normalize.ModePooling:    pb.RequestMode_REQUEST_MODE_POOLING,
}

// modeFromProto is ModeAuto for UNSPECIFIED and for values it does not know.
func modeFromProto(m pb.RequestMode) normalize.Mode {
	return normalize.Mode(max(slices.Index(modeProtos[:], m), 0))
}

func modeToProto(m normalize.Mode) pb.RequestMode {
	if m < 0 || int(m) >= len(modeProtos) {
		return pb.RequestMode_REQUEST_MODE_UNSPECIFIED
	}
	return modeProtos[m]
}

func checkPrefixLength(n int32) error {
	if n != 0 && (n < normalize.MinPrefixLength || n > normalize.MaxPrefixLength) {
		return invalidField("prefix_length", fmt.Sprintf("%d is outside %d..%d", n, normalize.MinPrefixLength, normalize.MaxPrefixLength))
	}
	return nil
}

func (ns normalizeService) Normalize(ctx context.Context, req *connect.Request[pb.NormalizeRequest]) (*connect.Response[pb.NormalizeResponse], error) {
	if err := checkPrefixLength(req.Msg.GetPrefixLength()); err != nil {
		return nil, connectError(err)
	}
	p, err := ns.s.pipe.Normalize(ctx, nil, req.Msg.GetBody(), modeFromProto(req.Msg.GetMode()), req.Msg.GetGroup(), int(req.Msg.GetPrefixLength()))
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.NormalizeResponse{
		CanonicalBody:     p.Body,
		Key:               p.Info.KeyHex(),
		RoutingTextLength: int32(p.Info.RoutingTextLen),
		Mode:              modeToProto(p.Info.Mode),
	}), nil
}

// adminService implements prefixgate.v1.AdminService.
type adminService struct{ s *Server }

var healthProtos = map[backends.State]pb.Health{
	backends.StateHealthy:  pb.Health_HEALTH_HEALTHY,
	backends.StateEjected:  pb.Health_HEALTH_EJECTED,
	backends.StateDraining: pb.Health_HEALTH_DRAINING,
}

func (as adminService) ListBackends(ctx context.Context, req *connect.Request[pb.ListBackendsRequest]) (*connect.Response[pb.ListBackendsResponse], error) {
	s := as.s
	rc := s.rt().Config()
	out := &pb.ListBackendsResponse{Policy: rc.Policy, LoadFactor: rc.LoadFactor}
	for _, st := range s.rt().Status() {
		b := st.Member.(*backends.Backend)
		h := b.Health()
		out.Backends = append(out.Backends, &pb.Backend{
			Name:                 st.Name,
			Address:              b.URL.String(),
			Health:               healthProtos[b.State()],
			InFlight:             int32(st.InFlight),
			Share:                st.Share,
			Models:               st.Models,
			ConcurrencyThreshold: int32(st.Threshold),
			LastError:            h.LastError,
			LastErrorTime:        rfc3339(h.LastErrorAt),
			HealthSince:          rfc3339(h.Since),
		})
	}
	return connect.NewResponse(out), nil
}

// rfc3339 formats t in UTC for a message field, "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func (as adminService) Explain(ctx context.Context, req *connect.Request[pb.ExplainRequest]) (*connect.Response[pb.ExplainResponse], error) {
	if err := checkPrefixLength(req.Msg.GetPrefixLength()); err != nil {
		return nil, connectError(err)
	}
	res, _, err := as.s.explain(ctx, req.Msg.GetBody(), modeFromProto(req.Msg.GetMode()), req.Msg.GetGroup(), int(req.Msg.GetPrefixLength()))
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(res), nil
}

// explain is Explain for both front doors (the RPC and POST /v1/explain):
// where the body would go now and why. A request that would not be placed
// (no backend serves its model, none is healthy, all are full) is
// explained too, with an empty backend and every backend skipped and why;
// only a body that cannot be routed at all is an error. decision is the
// decision as X-Prefixgate-Decision would name it, "" when not placed.
func (s *Server) explain(ctx context.Context, body []byte, mode normalize.Mode, group string, prefixLength int) (res *pb.ExplainResponse, decision string, err error) {
	p, err := s.pipe.Normalize(ctx, nil, body, mode, group, prefixLength)
	if err != nil {
		return nil, "", err
	}
	ex := s.rt().Explain(p.RouteRequest())
	decision = ex.Reason.String()
	res = &pb.ExplainResponse{
		Routing:           routingOf(ex.Backend, ex.Reason, ex.Distance, p.Info),
		Home:              ex.Home,
		Mode:              modeToProto(p.Info.Mode),
		RoutingTextLength: int32(p.Info.RoutingTextLen),
		Reason:            explainSentence(ex),
	}
	if ex.Err != nil {
		decision = ""
		res.Routing.Decision, res.Routing.SpillDistance = pb.Decision_DECISION_UNSPECIFIED, 0
		res.Reason = s.unplacedSentence(ex.Err, p.Info.Model)
		if len(ex.Skipped) == 0 {
			ex.Skipped = skippedForModel(s.rt().Status(), p.Info.Model)
		}
	}
	for _, sk := range ex.Skipped {
		res.Skipped = append(res.Skipped, fmt.Sprintf("%s (%s): %s", sk.Backend, sk.Via, sk.Why))
	}
	return res, decision, nil
}

// skippedForModel says, for a request the router has no candidate for, why
// each backend is not one: it does not serve the model, or it is out of the
// candidate set.
func skippedForModel(members []route.MemberStatus, model string) []route.Skip {
	out := make([]route.Skip, 0, len(members))
	for _, m := range members {
		why := ""
		switch {
		case model != "" && len(m.Models) > 0 && !slices.Contains(m.Models, model):
			why = "does not serve model " + pipeline.QuoteModel(model)
		case !m.Healthy:
			why = m.Member.(*backends.Backend).HealthName()
		default:
			continue
		}
		out = append(out, route.Skip{Backend: m.Name, Via: "candidates", Why: why})
	}
	return out
}

// unplacedSentence says what the client would get for a request the router
// would not place now, and why.
func (s *Server) unplacedSentence(err error, model string) string {
	re := pipeline.AsError(s.pipe.PickError(err, model))
	switch {
	case errors.Is(err, route.ErrSaturated):
		return fmt.Sprintf("every candidate is at its bound; the request would wait in the queue for up to %v, then get %d %s",
			s.rt().Config().QueueWait, re.Status, re.Code)
	case errors.Is(err, route.ErrUnknownModel):
		return fmt.Sprintf("no backend lists model %s; the request would get %d %s (the fleet serves %s)",
			pipeline.QuoteModel(model), re.Status, re.Code, s.pipe.ServedModels())
	case errors.Is(err, route.ErrNoCandidates):
		return fmt.Sprintf("no healthy backend serves model %s; the request would get %d %s: %s",
			pipeline.QuoteModel(model), re.Status, re.Code, pipeline.WhyNoneHealthy(s.rt().Status(), model))
	}
	return re.Message
}

// handleExplain is Explain for curl: POST /v1/explain with the raw request
// body (the same body one would send to /v1/chat/completions, /v1/completions
// or /invocations), the group in X-Prefixgate-Group, and optional query
// parameters mode (auto, chat, completion, native, responses, messages,
// pooling) and prefix_length. It
// answers JSON.
func (s *Server) handleExplain(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, methodNotAllowed(w, r, http.MethodPost))
		return
	}
	q := r.URL.Query()
	mode, err := normalize.ParseMode(cmp.Or(q.Get("mode"), "auto"))
	if err != nil {
		writeError(w, &pipeline.Error{Status: http.StatusBadRequest, Code: "invalid_field", Param: "mode",
			Message: fmt.Sprintf("query parameter mode=%.64q is not auto, chat, completion, native, responses, messages or pooling", q.Get("mode"))})
		return
	}
	prefixLength := 0
	if v := q.Get("prefix_length"); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil {
			err = checkPrefixLength(int32(max(min(n, math.MaxInt32), math.MinInt32)))
		} else {
			err = invalidField("prefix_length", fmt.Sprintf("%.32q is not an integer", v))
		}
		if err != nil {
			writeError(w, err)
			return
		}
		prefixLength = n
	}
	if err := checkJSONContentType(r); err != nil {
		writeError(w, err)
		return
	}
	bp := getBodyBuffer()
	raw, err := s.readBody(r, w, *bp)
	defer putBodyBuffer(bp, raw)
	if err != nil {
		writeBodyError(w, r, err)
		return
	}
	body, rt, mode, err := explainTarget(q.Get("path"), raw, mode)
	if err != nil {
		writeError(w, err)
		return
	}
	res, decision, err := s.explain(r.Context(), body, mode, r.Header.Get(GroupHeader), prefixLength)
	if err != nil {
		writeError(w, err)
		return
	}
	out := explainJSON{
		Backend:           res.GetRouting().GetBackend(),
		Decision:          decision,
		Key:               res.GetRouting().GetKey(),
		SpillDistance:     int(res.GetRouting().GetSpillDistance()),
		Home:              res.GetHome(),
		Mode:              modeFromProto(res.GetMode()).String(),
		RoutingTextLength: int(res.GetRoutingTextLength()),
		Reason:            res.GetReason(),
		Skipped:           append([]string{}, res.GetSkipped()...), // [] rather than null
	}
	if rt != nil && rt.Routing == routes.ByPrefixOrStored {
		s.explainStored(body, &out)
	}
	if out.Flow, err = s.explainFlow(r, body, mode, r.Header.Get(GroupHeader), prefixLength); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// explainTarget is the body to explain and its mode. A path (the query
// parameter) names the JSON route whose body raw is, whose mode it is
// normalized in; without one, a body of exactly two members, "path" (a
// JSON route's path) and "body" (an object), is that route's body;
// anything else is explained in mode as it is.
func explainTarget(path string, raw []byte, mode normalize.Mode) ([]byte, *routes.Route, normalize.Mode, error) {
	param := "path"
	if path == "" {
		top := gjson.ParseBytes(raw)
		p, b := top.Get("path"), top.Get("body")
		members := 0
		top.ForEach(func(_, _ gjson.Result) bool { members++; return members <= 2 })
		if !top.IsObject() || members != 2 || p.Type != gjson.String || !b.IsObject() {
			return raw, nil, mode, nil
		}
		path, raw, param = p.Str, []byte(b.Raw), "body.path"
	}
	rt := routes.Lookup(path)
	if rt == nil || rt.Body != routes.JSONBody || rt.Routing == routes.Local {
		return nil, nil, mode, &pipeline.Error{Status: http.StatusBadRequest, Code: "invalid_field", Param: param,
			Message: fmt.Sprintf("path %.200q is not a JSON route the router serves", path)}
	}
	return raw, rt, rt.Mode, nil
}

// explainStored says where a Responses body naming previous_response_id
// goes: to the backend that stored it, whatever the key says, or nowhere
// (404) when the router does not know the id.
func (s *Server) explainStored(body []byte, out *explainJSON) {
	prev := gjson.GetBytes(body, "previous_response_id")
	if prev.Type != gjson.String || prev.Str == "" {
		return
	}
	backend, ok := s.responses.Get(prev.Str)
	if !ok {
		out.Backend, out.Decision, out.SpillDistance = "", "", 0
		out.Reason = fmt.Sprintf("previous_response_id %.300q is not known to this router: the request gets 404 response_not_found", prev.Str)
		return
	}
	out.Backend, out.Decision, out.SpillDistance = backend, "stored", 0
	out.Reason = fmt.Sprintf("previous_response_id %.300q is stored on %s, which alone can answer it: the request goes there while it is healthy", prev.Str, backend)
}

// explainJSON is ExplainResponse for curl: flat, with the decision and mode
// named as in the X-Prefixgate-Decision header and the --mode flag.
type explainJSON struct {
	Backend           string   `json:"backend"`
	Decision          string   `json:"decision"`
	Key               string   `json:"key"`
	SpillDistance     int      `json:"spill_distance"`
	Home              string   `json:"home"`
	Mode              string   `json:"mode"`
	RoutingTextLength int      `json:"routing_text_length"`
	Reason            string   `json:"reason"`
	Skipped           []string `json:"skipped"`
	// Flow is flow control's view: the request's flow, band and the
	// queue before it (absent when flow control is off).
	Flow *flowJSON `json:"flow,omitempty"`
}

// explainSentence says in one sentence why the router chose what it chose;
// for prefix-index it goes on with every candidate's prediction.
func explainSentence(ex route.Explanation) string {
	s := reasonSentence(ex)
	if len(ex.Costs) == 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s)
	b.WriteString("; candidates in ring order from the key's home (matched prompt tokens, predicted cost in tokens of work, load/bound):")
	for i, c := range ex.Costs {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %s matched %d, cost %d, load %d/%d, %s", c.Backend, c.MatchedTokens, c.Cost, c.Load, c.Bound, c.Why)
	}
	return b.String()
}

func reasonSentence(ex route.Explanation) string {
	if len(ex.Costs) > 0 && (ex.Reason == route.ReasonAffinity || ex.Reason == route.ReasonPrefixMatch) {
		for _, c := range ex.Costs {
			if c.Backend == ex.Backend && c.Why == "chosen" && c.MatchedTokens > 0 {
				return fmt.Sprintf("%s holds %d tokens of the prompt and has the least predicted work, %d tokens, below its bound of %d", ex.Backend, c.MatchedTokens, c.Cost, c.Bound)
			}
		}
	}
	switch ex.Reason {
	case route.ReasonAffinity:
		return fmt.Sprintf("%s owns the key on the ring and is below its bound of %d", ex.Backend, ex.Bound)
	case route.ReasonSpillChain:
		return fmt.Sprintf("home %s is at its bound; spill key %d leads to %s, which shares the longer prefix", ex.Home, ex.Distance, ex.Backend)
	case route.ReasonSpill:
		return fmt.Sprintf("home %s is at its bound; the clockwise walk passed %d backends to reach %s", ex.Home, ex.Distance, ex.Backend)
	case route.ReasonLeastOutstanding:
		return fmt.Sprintf("%s has the fewest requests in flight", ex.Backend)
	case route.ReasonRandom:
		return fmt.Sprintf("%s was drawn at random", ex.Backend)
	case route.ReasonPrefixMatch:
		return fmt.Sprintf("%s has the least predicted work below its bound", ex.Backend)
	}
	return ex.Reason.String()
}
