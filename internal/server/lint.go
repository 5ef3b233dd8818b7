package server

import (
	"cmp"
	"context"
	"errors"

	"connectrpc.com/connect"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/normalize/lint"
)

// maxLintRequests bounds one Lint call; larger corpora belong to the CLI.
const maxLintRequests = 10000

// Lint runs the prompt linter over the request bodies of one call, with the
// same engine as "prefixgate lint".
func (ns normalizeService) Lint(ctx context.Context, req *connect.Request[pb.LintRequest]) (*connect.Response[pb.LintResponse], error) {
	msg := req.Msg
	if err := checkPrefixLength(msg.GetPrefixLength()); err != nil {
		return nil, connectError(err)
	}
	if n := len(msg.GetRequests()); n > maxLintRequests {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("requests: more than 10000 bodies in one call"))
	}
	if msg.GetReplicas() < 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("replicas: must not be negative"))
	}
	rep, err := lint.Check(msg.GetRequests(), lint.Options{
		Mode:         modeFromProto(msg.GetMode()),
		PrefixLength: cmp.Or(int(msg.GetPrefixLength()), ns.s.cfg.Pipeline.PrefixLength),
		Replicas:     int(msg.GetReplicas()),
		Direct:       msg.GetDirect(),
	})
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	out := &pb.LintResponse{Findings: make([]*pb.Finding, 0, len(rep.Findings))}
	for _, f := range rep.Findings {
		out.Findings = append(out.Findings, &pb.Finding{
			RuleId:       f.RuleID,
			Severity:     severityProtos[f.Severity],
			Message:      f.Message,
			RequestIndex: int32(f.RequestIndex),
			JsonPath:     f.JSONPath,
			Offset:       int32(f.Offset),
			Hint:         f.Hint,
		})
	}
	s := rep.Summary
	out.Summary = &pb.LintSummary{
		Requests:              int32(s.Requests),
		Errors:                int32(s.Errors),
		Warnings:              int32(s.Warnings),
		Infos:                 int32(s.Infos),
		SuggestedPrefixLength: int32(s.SuggestedPrefixLength),
		ExpectedHitRate:       s.ExpectedHitRate,
		ExpectedMaxShareRatio: s.ExpectedMaxShareRatio,
	}
	return connect.NewResponse(out), nil
}

var severityProtos = map[lint.Severity]pb.Severity{
	lint.Info:    pb.Severity_SEVERITY_INFO,
	lint.Warning: pb.Severity_SEVERITY_WARNING,
	lint.Error:   pb.Severity_SEVERITY_ERROR,
}
