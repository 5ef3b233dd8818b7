package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/route"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/server"
)

// harness is a router in front of a simulated fleet, with its admin
// handler on a listener of its own, as serve's admin.listen runs it.
type harness struct {
	base, admin string
	fleet       *vllmsim.Fleet
}

func startHarness(t *testing.T, k int, cfg server.Config, sim vllmsim.Config) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if sim.Preset == "" {
		sim = vllmsim.Config{Preset: "tiny", Speed: 50}
	}
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", k, sim)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cfg.Backends = append(fleet.URLs(), cfg.Backends...)
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := &http.Server{Handler: srv.AdminHandler(), ReadHeaderTimeout: 5 * time.Second}
	go admin.Serve(aln)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		admin.Close()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		fleet.Close()
	})
	return &harness{base: "http://" + ln.Addr().String(), admin: "http://" + aln.Addr().String(), fleet: fleet}
}

// call sends one request and returns its status, headers and body.
func call(t *testing.T, method, url, contentType string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// openAIError is OpenAI's error body.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, body []byte) openAIError {
	t.Helper()
	var e openAIError
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == "" {
		t.Fatalf("body %s is not an OpenAI error: %v", body, err)
	}
	return e
}

func chatBodyFor(model, doc string) []byte {
	b, _ := json.Marshal(map[string]any{
		"model":      model,
		"messages":   []map[string]string{{"role": "system", "content": doc}, {"role": "user", "content": "what now?"}},
		"max_tokens": 3,
	})
	return b
}

// setDrain drains or undrains a backend through the admin handler.
func (h *harness) setDrain(t *testing.T, name string, drain bool) map[string]any {
	t.Helper()
	verb := "undrain"
	if drain {
		verb = "drain"
	}
	status, _, body := call(t, http.MethodPost, h.admin+"/admin/backends/"+name+"/"+verb, "", nil, nil)
	if status != http.StatusOK {
		t.Fatalf("%s %s: status %d, body %s", verb, name, status, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func backendNames(h *harness) []string {
	var names []string
	for _, u := range h.fleet.URLs() {
		names = append(names, strings.TrimPrefix(u, "http://"))
	}
	return names
}

// TestUnknownModelIsNotFound: a model no backend lists is 404
// model_not_found (NotFound over Connect and gRPC), whatever the fleet's
// health; a served model with no healthy backend is 503. Explain answers
// both with the backends skipped and why instead of failing.
func TestUnknownModelIsNotFound(t *testing.T) {
	h := startHarness(t, 2, server.Config{}, vllmsim.Config{})
	doc := strings.Repeat("The refund window is thirty days. ", 20)
	unknown := chatBodyFor("gpt-4o", doc)
	served := chatBodyFor("vllmsim/tiny", doc)

	checkUnknown := func() {
		t.Helper()
		status, _, body := call(t, http.MethodPost, h.base+"/v1/chat/completions", "application/json", unknown, nil)
		if status != http.StatusNotFound {
			t.Fatalf("unknown model: status %d, body %s; want 404", status, body)
		}
		e := decodeError(t, body)
		if e.Error.Code != "model_not_found" || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != "model" ||
			!strings.Contains(e.Error.Message, `"gpt-4o"`) || !strings.Contains(e.Error.Message, "vllmsim/tiny") {
			t.Errorf("unknown model error = %+v; want model_not_found naming the model and what the fleet serves", e.Error)
		}
		client := prefixgatev1connect.NewInferenceServiceClient(http.DefaultClient, h.base, connect.WithGRPC())
		_, err := client.Chat(context.Background(), connect.NewRequest(&pb.ChatRequest{Input: &pb.ChatInput{
			Model: "gpt-4o", Messages: []*pb.Message{{Role: "user", Content: "hi"}}}}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("unknown model over gRPC: %v; want NotFound", err)
		}
	}
	status, hdr, body := call(t, http.MethodPost, h.base+"/v1/chat/completions", "application/json", served, nil)
	if status != http.StatusOK || hdr.Get(server.BackendHeader) == "" {
		t.Fatalf("served model: status %d, body %s", status, body)
	}
	checkUnknown()

	// Explain of the unknown model: every backend skipped, and why.
	admin := prefixgatev1connect.NewAdminServiceClient(http.DefaultClient, h.base)
	ex, err := admin.Explain(context.Background(), connect.NewRequest(&pb.ExplainRequest{Body: unknown}))
	if err != nil {
		t.Fatalf("Explain of an unknown model failed: %v", err)
	}
	if ex.Msg.GetRouting().GetBackend() != "" || len(ex.Msg.GetSkipped()) != 2 || !strings.Contains(ex.Msg.GetReason(), "404") {
		t.Errorf("Explain = %v; want no backend, 2 skipped, a reason naming 404", ex.Msg)
	}
	for _, sk := range ex.Msg.GetSkipped() {
		if !strings.Contains(sk, `does not serve model "gpt-4o"`) {
			t.Errorf("skipped %q does not say the model is not served", sk)
		}
	}

	// The fleet goes down for its model: 503, retryable; the unknown model
	// stays 404.
	for _, name := range backendNames(h) {
		if got := h.setDrain(t, name, true); got["state"] != "draining" {
			t.Fatalf("drain %s: %v", name, got)
		}
	}
	status, _, body = call(t, http.MethodPost, h.base+"/v1/chat/completions", "application/json", served, nil)
	if status != http.StatusServiceUnavailable || decodeError(t, body).Error.Code != "no_backend" {
		t.Errorf("fleet down: status %d, body %s; want 503 no_backend", status, body)
	}
	checkUnknown()
	ex, err = admin.Explain(context.Background(), connect.NewRequest(&pb.ExplainRequest{Body: served}))
	if err != nil {
		t.Fatalf("Explain with the fleet down failed: %v", err)
	}
	if ex.Msg.GetRouting().GetBackend() != "" || len(ex.Msg.GetSkipped()) != 2 || !strings.Contains(ex.Msg.GetReason(), "503") {
		t.Errorf("Explain = %v; want no backend, 2 skipped, a reason naming 503", ex.Msg)
	}
	for _, sk := range ex.Msg.GetSkipped() {
		if !strings.HasSuffix(sk, ": draining") {
			t.Errorf("skipped %q does not say draining", sk)
		}
	}
}

// metricValue reads one sample of /metrics; ok is false when absent.
func metricValue(t *testing.T, base, series string) (v float64, ok bool) {
	t.Helper()
	_, _, body := call(t, http.MethodGet, base+"/metrics", "", nil, nil)
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if rest, found := strings.CutPrefix(sc.Text(), series+" "); found {
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatal(err)
			}
			return v, true
		}
	}
	return 0, false
}

// TestReadinessFollowsFleet: /readyz and gRPC health say not ready while no
// backend is healthy and ready again once one is; every backend has a
// health series from the start; reflection lists the health service.
func TestReadinessFollowsFleet(t *testing.T) {
	h := startHarness(t, 2, server.Config{}, vllmsim.Config{})
	names := backendNames(h)
	for _, n := range names {
		if v, ok := metricValue(t, h.base, `prefixgate_backend_healthy{backend="`+n+`"}`); !ok || v != 1 {
			t.Errorf("prefixgate_backend_healthy for %s at start = %v (present %v); want 1", n, v, ok)
		}
	}
	conn, err := grpc.NewClient(strings.TrimPrefix(h.base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	check := func(ready bool) {
		t.Helper()
		status, _, body := call(t, http.MethodGet, h.base+"/readyz", "", nil, nil)
		if want := map[bool]int{true: 200, false: 503}[ready]; status != want {
			t.Errorf("/readyz = %d %s; want %d", status, body, want)
		}
		want := map[bool]healthpb.HealthCheckResponse_ServingStatus{true: healthpb.HealthCheckResponse_SERVING, false: healthpb.HealthCheckResponse_NOT_SERVING}[ready]
		for _, svc := range []string{"", "prefixgate.v1.InferenceService"} {
			res, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || res.GetStatus() != want {
				t.Errorf("health %q = %v, %v; want %v", svc, res.GetStatus(), err, want)
			}
		}
		// Normalizing needs no backend.
		res, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "prefixgate.v1.NormalizeService"})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of NormalizeService = %v, %v; want SERVING", res.GetStatus(), err)
		}
		for _, n := range names[:1] {
			v, _ := metricValue(t, h.base, `prefixgate_backend_healthy{backend="`+n+`"}`)
			if (v == 1) != ready {
				t.Errorf("prefixgate_backend_healthy for %s = %v with ready %v", n, v, ready)
			}
		}
	}
	check(true)
	// A load balancer that watches sees each change as it happens.
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watch, err := health.Watch(wctx, &healthpb.HealthCheckRequest{Service: "prefixgate.v1.InferenceService"})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		res, err := watch.Recv()
		if err != nil || res.GetStatus() != want {
			t.Fatalf("watch: %v, %v; want %v", res.GetStatus(), err, want)
		}
	}
	next(healthpb.HealthCheckResponse_SERVING)
	for _, n := range names {
		h.setDrain(t, n, true)
	}
	check(false)
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	h.setDrain(t, names[0], false)
	check(true)
	next(healthpb.HealthCheckResponse_SERVING)

	stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, s := range res.GetListServicesResponse().GetService() {
		listed = listed || s.GetName() == "grpc.health.v1.Health"
	}
	if !listed {
		t.Errorf("reflection lists %v; want grpc.health.v1.Health among them", res.GetListServicesResponse().GetService())
	}
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "grpc.health.v1.Health"}}); err != nil {
		t.Fatal(err)
	}
	if res, err = stream.Recv(); err != nil || len(res.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("no file descriptor for grpc.health.v1.Health: %v, %v", res, err)
	}
}

// TestReadinessAfterEjection: when every backend stops answering its
// probes, the router reports not ready by itself.
func TestReadinessAfterEjection(t *testing.T) {
	h := startHarness(t, 1, server.Config{Pool: backends.Options{ProbeInterval: 20 * time.Millisecond}}, vllmsim.Config{})
	if status, _, _ := call(t, http.MethodGet, h.base+"/readyz", "", nil, nil); status != 200 {
		t.Fatalf("/readyz = %d before the fleet stopped; want 200", status)
	}
	h.fleet.Close()
	for i := 0; ; i++ {
		status, _, _ := call(t, http.MethodGet, h.base+"/readyz", "", nil, nil)
		if status == http.StatusServiceUnavailable {
			break
		}
		if i == 500 {
			t.Fatalf("/readyz still %d after the only backend stopped and 500 polls", status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawPost writes a whole request (head, then all of body) on a new
// connection before reading anything, as Python's http.client does, and
// returns the status line it then reads, or the error that ended writing.
func rawPost(t *testing.T, base, head string, body io.Reader) (statusLine string, written int64, err error) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head); err != nil {
		return "", 0, err
	}
	written, err = io.Copy(conn, body)
	if err != nil {
		return "", written, err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), written, err
}

// TestOversizedBodyReadsBack413: a client that sends a 64 MiB body whole
// before reading reads the 413, for a declared length and for a chunked
// body; a client that never stops sending is cut off after a bounded
// amount.
func TestOversizedBodyReadsBack413(t *testing.T) {
	h := startHarness(t, 1, server.Config{}, vllmsim.Config{})
	const size = 64 << 20
	t.Run("content-length", func(t *testing.T) {
		head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
		line, _, err := rawPost(t, h.base, head, io.LimitReader(zeros{}, size))
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 413") {
			t.Fatalf("status line %q, err %v; want HTTP/1.1 413", line, err)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		head := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
		var chunks bytes.Buffer
		chunk := bytes.Repeat([]byte{'a'}, 1<<20)
		for range size >> 20 {
			fmt.Fprintf(&chunks, "%x\r\n%s\r\n", len(chunk), chunk)
		}
		chunks.WriteString("0\r\n\r\n")
		line, _, err := rawPost(t, h.base, head, &chunks)
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 413") {
			t.Fatalf("status line %q, err %v; want HTTP/1.1 413", line, err)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		const declared = 4 << 30
		head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", declared)
		_, written, err := rawPost(t, h.base, head, io.LimitReader(zeros{}, declared))
		if err == nil {
			t.Fatalf("the router read all of a %d-byte body; want it to stop lingering", declared)
		}
		if written >= declared/2 {
			t.Errorf("the router read %d bytes after a 413; want a bound well below %d", written, declared)
		}
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestRESTEdges: unknown paths, non-JSON content types and the per-string
// limit answer OpenAI-shaped errors.
func TestRESTEdges(t *testing.T) {
	h := startHarness(t, 1, server.Config{Pipeline: pipeline.Config{MaxStringBytes: 1024}}, vllmsim.Config{})
	chat := []byte(`{"model":"vllmsim/tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	long := []byte(`{"model":"vllmsim/tiny","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`)
	for _, tc := range []struct {
		name, method, path, ctype string
		body                      []byte
		status                    int
		code                      string
	}{
		{"unknown path", http.MethodPost, "/v1/chat/completion", "application/json", chat, 404, "unknown_url"},
		{"root", http.MethodGet, "/", "", nil, 404, "unknown_url"},
		{"text/plain", http.MethodPost, "/v1/chat/completions", "text/plain", chat, 415, "unsupported_media_type"},
		{"form", http.MethodPost, "/v1/completions", "application/x-www-form-urlencoded", chat, 415, "unsupported_media_type"},
		{"multipart", http.MethodPost, "/invocations", "multipart/form-data; boundary=x", chat, 415, "unsupported_media_type"},
		{"explain form", http.MethodPost, "/v1/explain", "application/x-www-form-urlencoded", chat, 415, "unsupported_media_type"},
		{"string over the limit", http.MethodPost, "/v1/chat/completions", "application/json", long, 400, "string-limit"},
		{"models by POST", http.MethodPost, "/v1/models", "application/json", chat, 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := call(t, tc.method, h.base+tc.path, tc.ctype, tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, body %s; want %d", status, body, tc.status)
			}
			if e := decodeError(t, body); !strings.Contains(e.Error.Code, tc.code) {
				t.Errorf("code %q; want %q (message %q)", e.Error.Code, tc.code, e.Error.Message)
			}
		})
	}
	for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "application/vnd.api+json"} {
		if status, _, body := call(t, http.MethodPost, h.base+"/v1/chat/completions", ct, chat, nil); status != 200 {
			t.Errorf("Content-Type %q: status %d, body %s; want 200", ct, status, body)
		}
	}
}

// TestExplainOverREST: POST /v1/explain takes the raw body and the group
// header and says where the same request to the proxy goes.
func TestExplainOverREST(t *testing.T) {
	h := startHarness(t, 3, server.Config{}, vllmsim.Config{})
	body := chatBodyFor("vllmsim/tiny", strings.Repeat("Shared handbook text. ", 60))
	group := map[string]string{server.GroupHeader: "team-a"}
	status, _, raw := call(t, http.MethodPost, h.base+"/v1/explain", "application/json", body, group)
	if status != 200 {
		t.Fatalf("explain: status %d, body %s", status, raw)
	}
	var ex struct {
		Backend, Decision, Key, Home, Mode, Reason string
		RoutingTextLength                          int `json:"routing_text_length"`
		Skipped                                    []string
	}
	if err := json.Unmarshal(raw, &ex); err != nil {
		t.Fatal(err)
	}
	status, hdr, out := call(t, http.MethodPost, h.base+"/v1/chat/completions", "application/json", body, group)
	if status != 200 {
		t.Fatalf("chat: status %d, body %s", status, out)
	}
	if ex.Backend != hdr.Get(server.BackendHeader) || ex.Key != hdr.Get(server.KeyHeader) || ex.Decision != hdr.Get(server.DecisionHeader) ||
		ex.Mode != "chat" || ex.RoutingTextLength == 0 || ex.Reason == "" || ex.Home != ex.Backend {
		t.Errorf("explain %+v; the request went to %s (%s, key %s)", ex, hdr.Get(server.BackendHeader), hdr.Get(server.DecisionHeader), hdr.Get(server.KeyHeader))
	}
	// Without the group the key differs.
	_, _, raw = call(t, http.MethodPost, h.base+"/v1/explain?mode=chat", "application/json", body, nil)
	var plain struct{ Key string }
	if err := json.Unmarshal(raw, &plain); err != nil || plain.Key == "" || plain.Key == ex.Key {
		t.Errorf("explain without group: key %q (%v); with group %q", plain.Key, err, ex.Key)
	}
	for _, q := range []string{"?mode=json", "?prefix_length=12", "?prefix_length=many"} {
		status, _, raw := call(t, http.MethodPost, h.base+"/v1/explain"+q, "application/json", body, nil)
		if status != 400 {
			t.Errorf("explain%s: status %d, body %s; want 400", q, status, raw)
		}
	}
}

// TestDrainFinishesInFlight: a drained backend takes no new request, the
// one in flight on it finishes, and undrained it gets its keys back.
func TestDrainFinishesInFlight(t *testing.T) {
	// At speed 2 the tiny engine takes about 2 s for 400 tokens: the stream
	// is still running while the test drains its backend.
	// prefix-aware: the test checks that an undrained backend gets its keys
	// back by affinity; prefix-index would keep the prompt where it was
	// cached while its home drained.
	h := startHarness(t, 2, server.Config{Route: route.Config{Policy: "prefix-aware"}}, vllmsim.Config{Preset: "tiny", Speed: 2})
	doc := strings.Repeat("Shared handbook text for the drain test. ", 40)
	streamBody, _ := json.Marshal(map[string]any{
		"model": "vllmsim/tiny", "stream": true, "max_tokens": 400, "ignore_eos": true,
		"messages": []map[string]string{{"role": "system", "content": doc}, {"role": "user", "content": "long answer"}},
	})
	req, _ := http.NewRequest(http.MethodPost, h.base+"/v1/chat/completions", bytes.NewReader(streamBody))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	home := resp.Header.Get(server.BackendHeader)
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: status %d, err %v", resp.StatusCode, err)
	}

	got := h.setDrain(t, home, true)
	if got["state"] != "draining" || got["in_flight"] != float64(1) {
		t.Errorf("drained %s: %v; want draining with 1 in flight", home, got)
	}
	// The same prompt, whose home is the drained backend, goes elsewhere.
	short := chatBodyFor("vllmsim/tiny", doc)
	status, hdr, body := call(t, http.MethodPost, h.base+"/v1/chat/completions", "application/json", short, nil)
	if status != 200 || hdr.Get(server.BackendHeader) == home || hdr.Get(server.BackendHeader) == "" {
		t.Errorf("while %s drains: status %d, backend %q, body %s; want another backend", home, status, hdr.Get(server.BackendHeader), body)
	}
	// The stream in flight finishes.
	rest, err := io.ReadAll(rd)
	if err != nil || !bytes.Contains(rest, []byte("data: [DONE]")) {
		t.Fatalf("stream on the drained backend ended with %v, [DONE] seen %v", err, bytes.Contains(rest, []byte("data: [DONE]")))
	}
	resp.Body.Close()
	var list struct{ Backends []map[string]any }
	_, _, raw := call(t, http.MethodGet, h.admin+"/admin/backends", "", nil, nil)
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Backends) != 2 {
		t.Fatalf("admin list %s: %v", raw, err)
	}
	for _, b := range list.Backends {
		if b["name"] == home && (b["state"] != "draining" || b["in_flight"] != float64(0)) {
			t.Errorf("after the stream: %v; want draining with 0 in flight", b)
		}
	}
	// ListBackends over Connect agrees.
	lb, err := prefixgatev1connect.NewAdminServiceClient(http.DefaultClient, h.base).ListBackends(context.Background(), connect.NewRequest(&pb.ListBackendsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range lb.Msg.GetBackends() {
		if b.GetName() == home && b.GetHealth() != pb.Health_HEALTH_DRAINING {
			t.Errorf("ListBackends says %s is %v; want DRAINING", home, b.GetHealth())
		}
	}

	h.setDrain(t, home, false)
	status, hdr, body = call(t, http.MethodPost, h.base+"/v1/chat/completions", "application/json", short, nil)
	if status != 200 || hdr.Get(server.BackendHeader) != home || hdr.Get(server.DecisionHeader) != "affinity" {
		t.Errorf("undrained: status %d, backend %q (%s), body %s; want %s by affinity", status, hdr.Get(server.BackendHeader), hdr.Get(server.DecisionHeader), body, home)
	}
	status, _, body = call(t, http.MethodPost, h.admin+"/admin/backends/nowhere:1/drain", "", nil, nil)
	if status != 404 || decodeError(t, body).Error.Code != "unknown_backend" {
		t.Errorf("drain of an unknown backend: %d %s; want 404 unknown_backend", status, body)
	}
}

// TestDrainFromConfig: a backend the configuration drains takes nothing
// new from the start; a reload that stops listing it undrains it.
func TestDrainFromConfig(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", 2, vllmsim.Config{Preset: "tiny", Speed: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	drained := strings.TrimPrefix(fleet.URLs()[1], "http://")
	// prefix-aware: prefix-index would keep these prompts on the backend
	// that cached them while the other was drained.
	cfg := server.Config{Backends: fleet.URLs(), Drain: []string{drained}, Route: route.Config{Policy: "prefix-aware"}}
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
	defer func() {
		cancel()
		<-done
	}()
	base := "http://" + ln.Addr().String()
	backendsSeen := func() map[string]bool {
		seen := map[string]bool{}
		for i := range 40 {
			status, hdr, body := call(t, http.MethodPost, base+"/v1/chat/completions", "application/json",
				chatBodyFor("vllmsim/tiny", fmt.Sprintf("document %d. %s", i, strings.Repeat("text ", 50))), nil)
			if status != 200 {
				t.Fatalf("status %d, body %s", status, body)
			}
			seen[hdr.Get(server.BackendHeader)] = true
		}
		return seen
	}
	if seen := backendsSeen(); seen[drained] || len(seen) != 1 {
		t.Errorf("with %s drained by configuration, requests went to %v", drained, seen)
	}
	cfg.Drain = nil
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if seen := backendsSeen(); !seen[drained] {
		t.Errorf("after the reload undrained %s, requests went to %v only", drained, seen)
	}
}

// TestRetriesZeroMeansNone: with retries 0 a request whose backend sends
// nothing back fails at once (502); with the default it is retried on a
// live backend.
func TestRetriesZeroMeansNone(t *testing.T) {
	// A port with nothing listening: connections are refused.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadName := dead.Addr().String()
	dead.Close()
	// findBody returns a body whose home is the dead backend.
	findBody := func(h *harness) []byte {
		for i := range 200 {
			body := chatBodyFor("vllmsim/tiny", fmt.Sprintf("document %d. %s", i, strings.Repeat("text ", 50)))
			_, _, raw := call(t, http.MethodPost, h.base+"/v1/explain", "application/json", body, nil)
			var ex struct{ Backend string }
			if err := json.Unmarshal(raw, &ex); err != nil {
				t.Fatal(err)
			}
			if ex.Backend == deadName {
				return body
			}
		}
		t.Fatal("no body routes to the dead backend in 200 tries")
		return nil
	}
	for _, tc := range []struct {
		name      string
		retries   *int
		retrySent *bool
		status    int
	}{
		{"zero", new(0), nil, http.StatusBadGateway},
		{"default", nil, nil, http.StatusOK},
		{"negative is the default", new(-1), nil, http.StatusOK},
		// A refused connection never reached the backend: retried even
		// when a request must run at most once.
		{"at most once", nil, new(false), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One probe failure does not eject (three do), so the dead
			// backend is still a candidate when the request comes.
			h := startHarness(t, 1, server.Config{Backends: []string{"http://" + deadName}, Retries: tc.retries, RetrySent: tc.retrySent}, vllmsim.Config{})
			status, _, body := call(t, http.MethodPost, h.base+"/v1/chat/completions", "application/json", findBody(h), nil)
			if status != tc.status {
				t.Errorf("status %d, body %s; want %d", status, body, tc.status)
			}
			retried, _ := metricValue(t, h.base, `prefixgate_retries_total{backend="`+deadName+`"}`)
			if want := map[bool]float64{true: 0, false: 1}[tc.status != 200]; retried != want {
				t.Errorf("prefixgate_retries_total = %v; want %v", retried, want)
			}
		})
	}
}
