package prefixgate_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/prefixgate/prefixgate/clients/go/prefixgate"
	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
)

// headerRecorder is a real Connect/gRPC InferenceService that records the
// flow headers of every call and answers Chat and Invoke.
type headerRecorder struct {
	prefixgatev1connect.UnimplementedInferenceServiceHandler
	mu    sync.Mutex
	calls []http.Header
}

func (h *headerRecorder) record(hd http.Header) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, hd.Clone())
}

func (h *headerRecorder) Chat(_ context.Context, req *connect.Request[pb.ChatRequest]) (*connect.Response[pb.ChatResponse], error) {
	h.record(req.Header())
	return connect.NewResponse(&pb.ChatResponse{Content: "ok"}), nil
}

func (h *headerRecorder) Invoke(_ context.Context, req *connect.Request[pb.InvokeRequest]) (*connect.Response[pb.InvokeResponse], error) {
	h.record(req.Header())
	return connect.NewResponse(&pb.InvokeResponse{Body: []byte(`{}`)}), nil
}

func (h *headerRecorder) last(t *testing.T) http.Header {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) == 0 {
		t.Fatal("the server saw no call")
	}
	return h.calls[len(h.calls)-1]
}

func startRecorder(t *testing.T) (*headerRecorder, *httptest.Server) {
	rec := &headerRecorder{}
	mux := http.NewServeMux()
	mux.Handle(prefixgatev1connect.NewInferenceServiceHandler(rec))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true // gRPC needs HTTP/2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return rec, srv
}

func TestCallOptionsSendFlowHeaders(t *testing.T) {
	rec, srv := startRecorder(t)
	ctx := context.Background()
	for _, proto := range []struct {
		name string
		opts []connect.ClientOption
	}{{"connect", nil}, {"grpc", []connect.ClientOption{connect.WithGRPC()}}, {"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}}} {
		c := prefixgate.NewClient(srv.Client(), srv.URL, proto.opts...)
		if _, err := c.Chat(ctx, liveSpec(), prefixgate.WithFairnessID("tenant-a"), prefixgate.WithObjective("interactive")); err != nil {
			t.Fatalf("%s: Chat: %v", proto.name, err)
		}
		h := rec.last(t)
		if got := h.Get("x-llm-d-inference-fairness-id"); got != "tenant-a" {
			t.Errorf("%s: fairness id header %q, want tenant-a", proto.name, got)
		}
		if got := h.Get("x-llm-d-inference-objective"); got != "interactive" {
			t.Errorf("%s: objective header %q, want interactive", proto.name, got)
		}
		// Without options neither header is sent.
		if _, err := c.Invoke(ctx, []byte(`{"model":"m","prompt":"p"}`), ""); err != nil {
			t.Fatalf("%s: Invoke: %v", proto.name, err)
		}
		h = rec.last(t)
		if h.Get("x-llm-d-inference-fairness-id") != "" || h.Get("x-llm-d-inference-objective") != "" {
			t.Errorf("%s: flow headers without options: %v", proto.name, h)
		}
	}
}

func TestCallOptionsRejectBadValues(t *testing.T) {
	rec, srv := startRecorder(t)
	c := prefixgate.NewClient(srv.Client(), srv.URL)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opt  prefixgate.CallOption
		want string
	}{
		{"empty id", prefixgate.WithFairnessID(""), "call option fairness id: is empty"},
		{"long id", prefixgate.WithFairnessID(strings.Repeat("a", 129)), "call option fairness id: is 129 bytes, over 128"},
		{"control", prefixgate.WithFairnessID("a\nb"), "call option fairness id: has a non-printable byte 0x0a at 1"},
		{"non-ascii", prefixgate.WithObjective("caf\u00e9"), "call option objective: byte 0xc3 at 3 is not a letter, digit, '-', '_' or '.'"},
		{"empty objective", prefixgate.WithObjective(""), "call option objective: is empty"},
		{"space", prefixgate.WithFairnessID("tenant "), "call option fairness id: starts or ends with a space"},
		{"objective space", prefixgate.WithObjective("big batch"), "call option objective: byte 0x20 at 3 is not a letter, digit, '-', '_' or '.'"},
	} {
		_, err := c.Chat(ctx, liveSpec(), tc.opt)
		var oe *prefixgate.OptionError
		if !errors.As(err, &oe) || err.Error() != tc.want {
			t.Errorf("%s: %v, want OptionError %q", tc.name, err, tc.want)
		}
		if _, err := c.InvokePath(ctx, "", []byte(`{}`), "", tc.opt); !errors.As(err, &oe) {
			t.Errorf("%s: InvokePath: %v, want OptionError", tc.name, err)
		}
	}
	rec.mu.Lock()
	n := len(rec.calls)
	rec.mu.Unlock()
	if n != 0 {
		t.Errorf("the server saw %d calls; a refused option sends nothing", n)
	}
	// The longest valid values pass.
	if _, err := c.Chat(ctx, liveSpec(), prefixgate.WithFairnessID("team a/"+strings.Repeat("x", 121)), prefixgate.WithObjective("Batch-1_v2."+strings.Repeat("o", 117))); err != nil {
		t.Errorf("128-byte values: %v", err)
	}
}

func TestFlowHeaders(t *testing.T) {
	h, err := prefixgate.FlowHeaders("tenant-a", "")
	if err != nil {
		t.Fatal(err)
	}
	if h.Get(prefixgate.FairnessIDHeader) != "tenant-a" || len(h) != 1 {
		t.Errorf("FlowHeaders: %v", h)
	}
	if _, err := prefixgate.FlowHeaders("a\x7f", "batch"); err == nil || !strings.Contains(err.Error(), "0x7f at 1") {
		t.Errorf("DEL byte: %v", err)
	}
}
