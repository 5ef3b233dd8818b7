package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/internal/server"
)

func TestLintRPC(t *testing.T) {
	base := startRouter(t, 1, server.Config{})
	client := prefixgatev1connect.NewNormalizeServiceClient(http.DefaultClient, base, connect.WithGRPC())
	system := "You are the support assistant. Shift log 2026-11-30T09:15:00Z. " + strings.Repeat("Follow the refund policy carefully. ", 20)
	res, err := client.Lint(context.Background(), connect.NewRequest(&pb.LintRequest{
		Requests: [][]byte{
			[]byte(`{"model":"m","messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"hi"}]}`),
			[]byte(`{"model":"m",}`),
		},
		PrefixLength: 1024,
		Replicas:     4,
	}))
	if err != nil {
		t.Fatal(err)
	}
	var timestamp, invalid *pb.Finding
	for _, f := range res.Msg.GetFindings() {
		switch f.GetRuleId() {
		case "volatile-timestamp":
			timestamp = f
		case "invalid-json":
			invalid = f
		}
	}
	if timestamp == nil || timestamp.GetRequestIndex() != 0 || timestamp.GetJsonPath() != "messages[0].content" ||
		timestamp.GetOffset() != int32(strings.Index(system, "2026")) || timestamp.GetSeverity() != pb.Severity_SEVERITY_WARNING {
		t.Errorf("volatile-timestamp finding = %v; want request 0, messages[0].content at the timestamp's offset, warning", timestamp)
	}
	if invalid == nil || invalid.GetRequestIndex() != 1 || invalid.GetSeverity() != pb.Severity_SEVERITY_ERROR {
		t.Errorf("invalid-json finding = %v; want request 1, error", invalid)
	}
	if s := res.Msg.GetSummary(); s.GetRequests() != 2 || s.GetErrors() < 1 || s.GetWarnings() < 1 {
		t.Errorf("summary = %v", s)
	}

	_, err = client.Lint(context.Background(), connect.NewRequest(&pb.LintRequest{Requests: [][]byte{[]byte(`{}`)}, PrefixLength: 10}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "prefix_length") {
		t.Errorf("prefix_length 10: err = %v; want InvalidArgument naming prefix_length", err)
	}
}
