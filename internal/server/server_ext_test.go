package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/normalize"
)

// startRouter starts k simulated replicas and the router in front of them,
// each on its own loopback listener, and returns the router's base URL.
func startRouter(t *testing.T, k int, cfg server.Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", k, vllmsim.Config{Preset: "tiny", Speed: 50})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backends = fleet.URLs()
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
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

func chatInput(doc, question string) *pb.ChatInput {
	return &pb.ChatInput{
		Model: "vllmsim/tiny",
		Messages: []*pb.Message{
			{Role: "system", Content: "Answer from this document.\n\n" + doc},
			{Role: "user", Content: question},
		},
		ExtraJson: `{"max_tokens": 4, "temperature": 0}`,
	}
}

func TestConnectClientChat(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	for _, proto := range []struct {
		name string
		opts []connect.ClientOption
	}{
		{"connect", nil},
		{"grpc", []connect.ClientOption{connect.WithGRPC()}},
		{"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}},
		{"connect+zstd", append(server.ClientCompressionOptions(), connect.WithSendCompression("zstd"))},
		{"connect+gzip", []connect.ClientOption{connect.WithSendGzip()}},
	} {
		t.Run(proto.name, func(t *testing.T) {
			client := prefixgatev1connect.NewInferenceServiceClient(http.DefaultClient, base, proto.opts...)
			res, err := client.Chat(context.Background(), connect.NewRequest(&pb.ChatRequest{Input: chatInput("the refund policy", "how long?")}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Msg.GetContent() == "" || res.Msg.GetUsage().GetPromptTokens() == 0 {
				t.Errorf("empty answer: %v", res.Msg)
			}
			r := res.Msg.GetRouting()
			if len(r.GetKey()) != 16 || r.GetBackend() == "" || r.GetDecision() != pb.Decision_DECISION_AFFINITY {
				t.Errorf("routing = %v; want a 16-digit key, a backend and affinity", r)
			}
			if got := res.Header().Get(server.BackendHeader); got != r.GetBackend() {
				t.Errorf("header %s = %q; want %q", server.BackendHeader, got, r.GetBackend())
			}
		})
	}
}

// TestGRPCGoClientChat calls the service with grpc-go, by method name as
// generated grpc-go stubs do (the repository generates none, so that the
// message package the Go SDK imports does not pull in grpc-go).
func TestGRPCGoClientChat(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	conn, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var header metadata.MD
	var keys []string
	for _, q := range []string{"first question?", "second, different question?"} {
		res := new(pb.ChatResponse)
		err := conn.Invoke(context.Background(), prefixgatev1connect.InferenceServiceChatProcedure,
			&pb.ChatRequest{Input: chatInput(strings.Repeat("shared document text ", 100), q)}, res, grpc.Header(&header))
		if err != nil {
			t.Fatal(err)
		}
		if res.GetContent() == "" {
			t.Errorf("empty content")
		}
		if got := header.Get(strings.ToLower(server.KeyHeader)); len(got) != 1 || got[0] != res.GetRouting().GetKey() {
			t.Errorf("metadata %s = %v; want [%s]", server.KeyHeader, got, res.GetRouting().GetKey())
		}
		keys = append(keys, res.GetRouting().GetKey())
	}
	if keys[0] != keys[1] {
		t.Errorf("same document, different final question: keys %s and %s differ", keys[0], keys[1])
	}

	stream, err := conn.NewStream(context.Background(), &grpc.StreamDesc{StreamName: "ChatStream", ServerStreams: true},
		prefixgatev1connect.InferenceServiceChatStreamProcedure)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&pb.ChatStreamRequest{Input: chatInput("doc", "stream please")}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var sawRouting, sawUsage bool
	for {
		msg := new(pb.ChatStreamResponse)
		err := stream.RecvMsg(msg)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(msg.GetDelta())
		sawRouting = sawRouting || msg.GetRouting() != nil
		sawUsage = sawUsage || msg.GetUsage() != nil
	}
	if text.Len() == 0 || !sawRouting || !sawUsage {
		t.Errorf("stream: text %q, routing %v, usage %v; want all", text.String(), sawRouting, sawUsage)
	}

	err = conn.Invoke(context.Background(), prefixgatev1connect.InferenceServiceInvokeProcedure,
		&pb.InvokeRequest{Body: []byte(`{"inputs": "x", "inputs": "y"}`)}, new(pb.InvokeResponse))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "offset") {
		t.Errorf("duplicate member: err = %v; want InvalidArgument naming the offset", err)
	}
}

func TestRESTProxy(t *testing.T) {
	base := startRouter(t, 2, server.Config{})
	post := func(path string, body string, hdr map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	chat := `{"model":"vllmsim/tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`

	resp, body := post("/v1/chat/completions", chat, nil)
	if resp.StatusCode != 200 || resp.Header.Get(server.KeyHeader) == "" || resp.Header.Get(server.DecisionHeader) != "affinity" {
		t.Fatalf("status %d, headers %v, body %s", resp.StatusCode, resp.Header, body)
	}
	// The same request serialized differently routes the same.
	resp2, _ := post("/v1/chat/completions", "{ \"max_tokens\" : 3.0, \"messages\":[{\"content\":\"h\\u0069\",\"role\":\"user\"}], \"model\":\"vllmsim/tiny\" }", nil)
	if resp2.Header.Get(server.KeyHeader) != resp.Header.Get(server.KeyHeader) {
		t.Errorf("equal requests got keys %s and %s", resp.Header.Get(server.KeyHeader), resp2.Header.Get(server.KeyHeader))
	}
	// A group changes the key.
	resp3, _ := post("/v1/chat/completions", chat, map[string]string{server.GroupHeader: "tenant-a"})
	if resp3.Header.Get(server.KeyHeader) == resp.Header.Get(server.KeyHeader) {
		t.Errorf("group did not change the key")
	}

	for _, tc := range []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		want             string
	}{
		{"trailing comma", "/v1/chat/completions", `{"model":"m","messages":[],}`, nil, 400, "offset"},
		{"duplicate member", "/v1/chat/completions", `{"model":"m","mod\u0065l":"n"}`, nil, 400, "duplicate"},
		{"lone surrogate", "/v1/completions", `{"model":"m","prompt":"\ud800"}`, nil, 400, "surrogate"},
		{"group too long", "/v1/chat/completions", chat, map[string]string{server.GroupHeader: strings.Repeat("g", 65)}, 400, "64"},
		{"group not printable", "/v1/chat/completions", chat, map[string]string{server.GroupHeader: "a\tb"}, 400, "non-printable"},
		{"unknown encoding", "/v1/chat/completions", chat, map[string]string{"Content-Encoding": "br"}, 415, "br"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(tc.path, tc.body, tc.hdr)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d; want %d (body %s)", resp.StatusCode, tc.status, body)
			}
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("body %s is not an OpenAI error: %v", body, err)
			}
			if !strings.Contains(e.Error.Message, tc.want) {
				t.Errorf("message %q lacks %q", e.Error.Message, tc.want)
			}
		})
	}

	big := bytes.Repeat([]byte("a"), 33<<20)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions", bytes.NewReader(big))
	resp4, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp4.Body.Close()
	if resp4.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("33 MiB body: status %d; want 413", resp4.StatusCode)
	}
}

func TestConnectMessageLimit(t *testing.T) {
	base := startRouter(t, 1, server.Config{Pipeline: pipeline.Config{MaxBodyBytes: 4096}})
	client := prefixgatev1connect.NewNormalizeServiceClient(http.DefaultClient, base)
	_, err := client.Normalize(context.Background(), connect.NewRequest(&pb.NormalizeRequest{Body: []byte(`"` + strings.Repeat("x", 8192) + `"`)}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("8 KiB message over a 4 KiB limit: err = %v; want ResourceExhausted", err)
	}
}

// TestMetricsListThePipelinesSeries: the series the request pipeline owns
// (normalization, decisions, queue wait, spills) are served at /metrics
// with the server's own.
func TestMetricsListThePipelinesSeries(t *testing.T) {
	base := startRouter(t, 2, server.Config{})
	chat := `{"model":"vllmsim/tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`
	for _, body := range []string{chat, `{"model":"m","messages":[],}`} {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for series, want := range map[string]float64{
		"prefixgate_normalize_seconds_count":                                                    2,
		`prefixgate_normalize_errors_total{reason="trailing-comma"}`:                            1,
		"prefixgate_routing_decision_seconds_count":                                             1,
		"prefixgate_queue_wait_seconds_count":                                                   0,
		"prefixgate_spills_total":                                                               0,
		`prefixgate_requests_total{backend="",code="400",decision="",route="chat_completions"}`: 1,
	} {
		if got, ok := metricValue(t, base, series); !ok || got != want {
			t.Errorf("%s = %v (listed: %v); want %v", series, got, ok, want)
		}
	}
}

// TestNormalizeRPCModes: the Normalize RPC takes the Responses, Messages
// and pooling modes, names the mode it detected, and answers the key the
// normalize package computes.
func TestNormalizeRPCModes(t *testing.T) {
	base := startRouter(t, 1, server.Config{})
	client := prefixgatev1connect.NewNormalizeServiceClient(http.DefaultClient, base)
	for _, c := range []struct {
		body      string
		mode      pb.RequestMode
		want      pb.RequestMode
		normalize normalize.Mode
	}{
		{`{"input":"hi","model":"m"}`, pb.RequestMode_REQUEST_MODE_UNSPECIFIED, pb.RequestMode_REQUEST_MODE_RESPONSES, normalize.ModeResponses},
		{`{"model":"m","max_tokens":5,"system":"s","messages":[{"role":"user","content":"hi"}]}`, pb.RequestMode_REQUEST_MODE_MESSAGES, pb.RequestMode_REQUEST_MODE_MESSAGES, normalize.ModeMessages},
		{`{"model":"r","query":"q","documents":["a"]}`, pb.RequestMode_REQUEST_MODE_POOLING, pb.RequestMode_REQUEST_MODE_POOLING, normalize.ModePooling},
	} {
		res, err := client.Normalize(context.Background(), connect.NewRequest(&pb.NormalizeRequest{Body: []byte(c.body), Mode: c.mode}))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		_, ri, err := normalize.Normalize(nil, []byte(c.body), normalize.Options{Mode: c.normalize}, normalize.KeyOptions{Mode: c.normalize})
		if err != nil {
			t.Fatal(err)
		}
		if res.Msg.GetMode() != c.want || res.Msg.GetKey() != ri.KeyHex() {
			t.Errorf("%s: mode %v key %s; want %v %s", c.body, res.Msg.GetMode(), res.Msg.GetKey(), c.want, ri.KeyHex())
		}
	}
	_, err := client.Normalize(context.Background(), connect.NewRequest(&pb.NormalizeRequest{Body: []byte(`{"model":"m","input":5}`), Mode: pb.RequestMode_REQUEST_MODE_RESPONSES}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "input: expected a string or an array") {
		t.Errorf("bad Responses body: %v", err)
	}
}
