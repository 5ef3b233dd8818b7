package prefixgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/clients/go/prefixgate"
	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/internal/server"
)

// routerURL returns PREFIXGATE_URL when set (a router started by
// internal/testfleet), else starts an in-process router in front of a
// simulated fleet. Only this test file imports the server; the SDK does not.
func routerURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("PREFIXGATE_URL"); u != "" {
		return u
	}
	ctx, cancel := context.WithCancel(context.Background())
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", 3, vllmsim.Config{Preset: "tiny", Speed: 50})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Backends: fleet.URLs()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		fleet.Close()
	})
	return "http://" + ln.Addr().String()
}

func liveSpec() prefixgate.PromptSpec {
	s := sampleSpec()
	s.Tools = nil // keep the simulated backend's prompt small
	s.Group = "sdk-go"
	return s
}

func TestLiveChat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	c := prefixgate.NewClient(nil, routerURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := liveSpec()
	_, ri, err := prefixgate.BuildKey(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Chat(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetContent() == "" || res.GetRouting().GetBackend() == "" {
		t.Errorf("empty answer or routing: %v", res)
	}
	// The key the SDK computes locally is the key the router used.
	if got := res.GetRouting().GetKey(); got != ri.KeyHex() {
		t.Errorf("router key %s, SDK key %s", got, ri.KeyHex())
	}

	st, err := c.ChatStream(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var text strings.Builder
	n := 0
	for st.Receive() {
		if n == 0 && st.Msg().GetRouting().GetKey() != ri.KeyHex() {
			t.Errorf("stream routing %v, want key %s", st.Msg().GetRouting(), ri.KeyHex())
		}
		n++
		text.WriteString(st.Msg().GetDelta())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 || text.Len() == 0 {
		t.Errorf("stream: %d messages, text %q", n, text.String())
	}
}

func TestLiveNormalizeAndAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	c := prefixgate.NewClient(nil, routerURL(t), connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := []byte(`{ "messages":[{"role":"system","content":"S"},{"role":"user","content":"q"}], "model":"vllmsim/tiny", "metadata":{"t":"1"} }`)
	local, ri, err := prefixgate.CanonicalizeAndKey(body, prefixgate.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.NormalizeBody(ctx, body, prefixgate.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.GetCanonicalBody()) != string(local) || res.GetKey() != ri.KeyHex() {
		t.Errorf("server %s %s, local %s %s", res.GetCanonicalBody(), res.GetKey(), local, ri.KeyHex())
	}

	_, err = c.NormalizeBody(ctx, []byte(`{"a":1,}`), prefixgate.KeyOptions{})
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "offset 7") {
		t.Errorf("invalid JSON: %v, want InvalidArgument with offset 7", err)
	}

	bs, err := c.ListBackends(ctx)
	if err != nil || len(bs.GetBackends()) == 0 {
		t.Fatalf("ListBackends: %v %v", bs, err)
	}
	ex, err := c.Explain(ctx, body, prefixgate.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ex.GetRouting().GetKey() != ri.KeyHex() || ex.GetRouting().GetBackend() == "" {
		t.Errorf("Explain %v, want key %s", ex, ri.KeyHex())
	}
}

// waitModels waits until every backend has answered the router's model
// probe: before that the router sends any model anywhere.
func waitModels(ctx context.Context, t *testing.T, c *prefixgate.Client) {
	t.Helper()
	for {
		bs, err := c.ListBackends(ctx)
		if err != nil {
			t.Fatal(err)
		}
		known := len(bs.GetBackends()) > 0
		for _, b := range bs.GetBackends() {
			known = known && len(b.GetModels()) > 0
		}
		if known {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("backends never reported their models")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func liveCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestLiveComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	c := prefixgate.NewClient(nil, routerURL(t))
	ctx := liveCtx(t)
	spec := prefixgate.CompletionSpec{
		Model:      "vllmsim/tiny",
		Prompt:     strings.Repeat("Once upon a time there was a cache. ", 20),
		Parameters: map[string]json.RawMessage{"max_tokens": json.RawMessage(`4`)},
		Group:      "sdk-go",
	}
	_, ri, err := prefixgate.BuildCompletionKey(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Complete(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetText() == "" || res.GetRouting().GetBackend() == "" || res.GetUsage().GetCompletionTokens() == 0 {
		t.Errorf("Complete: %v", res)
	}
	if got := res.GetRouting().GetKey(); got != ri.KeyHex() {
		t.Errorf("router key %s, SDK key %s", got, ri.KeyHex())
	}

	st, err := c.CompleteStream(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var text strings.Builder
	n, usage := 0, false
	for st.Receive() {
		if n == 0 && st.Msg().GetRouting().GetKey() != ri.KeyHex() {
			t.Errorf("stream routing %v, want key %s", st.Msg().GetRouting(), ri.KeyHex())
		}
		if n > 0 && st.Msg().GetRouting() != nil {
			t.Errorf("routing on message %d", n)
		}
		n++
		usage = usage || st.Msg().GetUsage() != nil
		text.WriteString(st.Msg().GetDelta())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != res.GetText() || !usage {
		t.Errorf("stream text %q (unary %q), usage chunk %v", text.String(), res.GetText(), usage)
	}

	// No backend serves the model: NotFound, passed through unchanged, and
	// not worth retrying.
	waitModels(ctx, t, c)
	spec.Model = "no-such-model"
	_, err = c.Complete(ctx, spec)
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound || prefixgate.IsRetryable(err) {
		t.Errorf("unknown model: %v, want a *connect.Error with NotFound, not retryable", err)
	}
}

func TestLiveInvoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	c := prefixgate.NewClient(nil, routerURL(t), connect.WithGRPC())
	ctx := liveCtx(t)
	body := []byte(`{"parameters": {"max_new_tokens": 3}, "inputs": "Tell me a story about caches."}`)
	ri, err := prefixgate.Key(body, prefixgate.KeyOptions{Mode: prefixgate.ModeNative, Group: "sdk-go"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Invoke(ctx, body, "sdk-go")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		GeneratedText string `json:"generated_text"`
		Details       struct {
			GeneratedTokens int `json:"generated_tokens"`
		} `json:"details"`
	}
	if err := json.Unmarshal(res.GetBody(), &out); err != nil || out.GeneratedText == "" || out.Details.GeneratedTokens != 3 {
		t.Errorf("Invoke body %s (%v)", res.GetBody(), err)
	}
	if res.GetRouting().GetKey() != ri.KeyHex() || res.GetRouting().GetBackend() == "" {
		t.Errorf("Invoke routing %v, want key %s", res.GetRouting(), ri.KeyHex())
	}
	_, err = c.Invoke(ctx, []byte(`{"inputs":`), "")
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("truncated body: %v, want InvalidArgument", err)
	}
}

func TestLiveLint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	c := prefixgate.NewClient(nil, routerURL(t))
	ctx := liveCtx(t)
	system := "You are the support assistant. Shift log 2026-11-30T09:15:00Z. " + strings.Repeat("Follow the refund policy carefully. ", 20)
	res, err := c.Lint(ctx, [][]byte{
		[]byte(`{"model":"vllmsim/tiny","messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"hi"}]}`),
		[]byte(`{"model":"vllmsim/tiny",}`),
	}, prefixgate.LintOptions{PrefixLength: 1024, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	var ts, invalid bool
	for _, f := range res.GetFindings() {
		switch f.GetRuleId() {
		case "volatile-timestamp":
			ts = f.GetRequestIndex() == 0 && f.GetJsonPath() == "messages[0].content" &&
				f.GetOffset() == int32(strings.Index(system, "2026")) && f.GetSeverity() == pb.Severity_SEVERITY_WARNING
		case "invalid-json":
			invalid = f.GetRequestIndex() == 1 && f.GetSeverity() == pb.Severity_SEVERITY_ERROR
		}
	}
	if !ts || !invalid {
		t.Errorf("findings %v: want volatile-timestamp on request 0 and invalid-json on request 1", res.GetFindings())
	}
	if s := res.GetSummary(); s.GetRequests() != 2 || s.GetWarnings() < 1 || s.GetErrors() < 1 {
		t.Errorf("summary %v", s)
	}
	_, err = c.Lint(ctx, [][]byte{[]byte(`{}`)}, prefixgate.LintOptions{PrefixLength: 10})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("prefix length 10: %v, want InvalidArgument", err)
	}
}

func TestLiveAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	c := prefixgate.NewClient(nil, routerURL(t), connect.WithGRPCWeb())
	ctx := liveCtx(t)
	bs, err := c.ListBackends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, b := range bs.GetBackends() {
		names[b.GetName()] = true
		if b.GetHealth() != pb.Health_HEALTH_HEALTHY || b.GetAddress() == "" {
			t.Errorf("backend %v", b)
		}
	}
	if len(names) == 0 || bs.GetPolicy() == "" {
		t.Fatalf("ListBackends %v", bs)
	}
	spec := liveSpec()
	body, ri, err := prefixgate.BuildKey(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := c.Explain(ctx, body, prefixgate.KeyOptions{Mode: prefixgate.ModeChat})
	if err != nil {
		t.Fatal(err)
	}
	if ex.GetRouting().GetKey() != ri.KeyHex() || !names[ex.GetRouting().GetBackend()] || !names[ex.GetHome()] ||
		ex.GetMode() != pb.RequestMode_REQUEST_MODE_CHAT || ex.GetReason() == "" {
		t.Errorf("Explain %v, want key %s on a listed backend", ex, ri.KeyHex())
	}
	// Chat lands where Explain said: on affinity, the home.
	res, err := c.Chat(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.GetRouting(); r.GetDecision() == pb.Decision_DECISION_AFFINITY && r.GetBackend() != ex.GetHome() {
		t.Errorf("Chat went to %s on affinity, Explain said home %s", r.GetBackend(), ex.GetHome())
	}
}

// TestLiveFlowOptions sends the flow call options to a live router, on a
// unary and a streamed call and over gRPC: the router takes them.
func TestLiveFlowOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	url := routerURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := []prefixgate.CallOption{prefixgate.WithFairnessID("sdk-go-tenant")}
	for _, c := range []*prefixgate.Client{prefixgate.NewClient(nil, url), prefixgate.NewClient(nil, url, connect.WithGRPC())} {
		res, err := c.Chat(ctx, liveSpec(), opts...)
		if err != nil || res.GetContent() == "" {
			t.Fatalf("Chat with flow options: %v %v", res, err)
		}
		st, err := c.ChatStream(ctx, liveSpec(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for st.Receive() {
			n++
		}
		if err := st.Err(); err != nil || n == 0 {
			t.Errorf("ChatStream with flow options: %d messages, %v", n, err)
		}
		st.Close()
	}
}

// TestLiveUnknownObjective: the router refuses an objective its
// configuration does not define with InvalidArgument naming the header, on
// Connect and gRPC; the option reached it as metadata.
func TestLiveUnknownObjective(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	url := routerURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []*prefixgate.Client{prefixgate.NewClient(nil, url), prefixgate.NewClient(nil, url, connect.WithGRPC())} {
		_, err := c.Chat(ctx, liveSpec(), prefixgate.WithObjective("sdk-undefined-objective"))
		if prefixgate.Code(err) != connect.CodeInvalidArgument || !strings.Contains(strings.ToLower(err.Error()), "x-llm-d-inference-objective") ||
			!strings.Contains(err.Error(), "sdk-undefined-objective") {
			t.Errorf("undefined objective: %v, want InvalidArgument naming the header and the objective", err)
		}
	}
}
