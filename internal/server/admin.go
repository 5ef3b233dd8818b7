package server

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// normalizeService implements prefixgate.v1.NormalizeService.
type normalizeService struct{ s *Server }

func modeFromProto(m pb.RequestMode) normalize.Mode {
	switch m {
	case pb.RequestMode_REQUEST_MODE_CHAT:
		return normalize.ModeChat
	case pb.RequestMode_REQUEST_MODE_COMPLETION:
		return normalize.ModeCompletion
	case pb.RequestMode_REQUEST_MODE_NATIVE:
		return normalize.ModeNative
	}
	return normalize.ModeAuto
}

func modeToProto(m normalize.Mode) pb.RequestMode {
	switch m {
	case normalize.ModeChat:
		return pb.RequestMode_REQUEST_MODE_CHAT
	case normalize.ModeCompletion:
		return pb.RequestMode_REQUEST_MODE_COMPLETION
	case normalize.ModeNative:
		return pb.RequestMode_REQUEST_MODE_NATIVE
	}
	return pb.RequestMode_REQUEST_MODE_UNSPECIFIED
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
	p, err := ns.s.prepare(ctx, req.Msg.GetBody(), modeFromProto(req.Msg.GetMode()), req.Msg.GetGroup(), int(req.Msg.GetPrefixLength()))
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.NormalizeResponse{
		CanonicalBody:     p.body,
		Key:               p.info.KeyHex(),
		RoutingTextLength: int32(p.info.RoutingTextLen),
		Mode:              modeToProto(p.info.Mode),
	}), nil
}

// adminService implements prefixgate.v1.AdminService.
type adminService struct{ s *Server }

func healthProto(h route.Health) pb.Health {
	switch h {
	case route.HealthHealthy:
		return pb.Health_HEALTH_HEALTHY
	case route.HealthEjected:
		return pb.Health_HEALTH_EJECTED
	case route.HealthDraining:
		return pb.Health_HEALTH_DRAINING
	}
	return pb.Health_HEALTH_UNSPECIFIED
}

func (as adminService) ListBackends(ctx context.Context, req *connect.Request[pb.ListBackendsRequest]) (*connect.Response[pb.ListBackendsResponse], error) {
	s := as.s
	rc := s.rt().Config()
	out := &pb.ListBackendsResponse{Policy: rc.Policy, LoadFactor: rc.LoadFactor}
	for _, st := range s.rt().Status() {
		b := &pb.Backend{
			Name:                 st.Name,
			Health:               healthProto(st.Health),
			InFlight:             int32(st.InFlight),
			Share:                st.Share,
			Models:               st.Models,
			ConcurrencyThreshold: int32(st.Threshold),
		}
		if pooled, ok := s.pool.Get(st.Name); ok {
			b.Address = pooled.URL.String()
		}
		out.Backends = append(out.Backends, b)
	}
	return connect.NewResponse(out), nil
}

func (as adminService) Explain(ctx context.Context, req *connect.Request[pb.ExplainRequest]) (*connect.Response[pb.ExplainResponse], error) {
	if err := checkPrefixLength(req.Msg.GetPrefixLength()); err != nil {
		return nil, connectError(err)
	}
	p, err := as.s.prepare(ctx, req.Msg.GetBody(), modeFromProto(req.Msg.GetMode()), req.Msg.GetGroup(), int(req.Msg.GetPrefixLength()))
	if err != nil {
		return nil, connectError(err)
	}
	ex := as.s.rt().Explain(routeRequest(p.info))
	if ex.Err != nil {
		return nil, connectError(pickError(ex.Err))
	}
	res := &pb.ExplainResponse{
		Routing: &pb.Routing{
			Backend:       ex.Backend,
			Decision:      decisionProto(ex.Reason),
			Key:           p.info.KeyHex(),
			SpillDistance: int32(ex.Distance),
		},
		Home:              ex.Home,
		Mode:              modeToProto(p.info.Mode),
		RoutingTextLength: int32(p.info.RoutingTextLen),
		Reason:            explainSentence(ex),
	}
	for _, sk := range ex.Skipped {
		res.Skipped = append(res.Skipped, fmt.Sprintf("%s (%s): %s", sk.Backend, sk.Via, sk.Why))
	}
	return connect.NewResponse(res), nil
}

// routeRequest turns a key into the router's request.
func routeRequest(info normalize.RouteInfo) route.Request {
	return route.Request{Key: info.Key, SpillKeys: info.SpillKeys, Model: info.Model, Blocks: info.Blocks, PromptTokens: info.PromptTokens}
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
