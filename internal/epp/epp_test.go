package epp

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/sticky"
	"github.com/prefixgate/prefixgate/route"
)

// harness is a picker over a fleet of simulated replicas, served over an
// in-process gRPC connection.
type harness struct {
	fleet  *testFleet
	client extprocv3.ExternalProcessorClient
	health healthpb.HealthClient
	names  []string
}

// testFleet is the picker's Fleet as serve wires it: a backend pool whose
// health and membership reach the router, and the pipeline in front of
// the router.
type testFleet struct {
	pool     *backends.Pool
	router   atomic.Pointer[route.Router]
	pipe     *pipeline.Pipeline
	stored   *sticky.Table
	sessions *sticky.Table
}

func (f *testFleet) Pipeline() *pipeline.Pipeline      { return f.pipe }
func (f *testFleet) RequestTimeout() time.Duration     { return time.Minute }
func (f *testFleet) Gatherer() prometheus.Gatherer     { return prometheus.NewRegistry() }
func (f *testFleet) RunBackground(ctx context.Context) { f.pool.ProbeAll(ctx); go f.pool.Run(ctx) }
func (f *testFleet) Router() *route.Router             { return f.router.Load() }
func (f *testFleet) StoredResponses() *sticky.Table    { return f.stored }
func (f *testFleet) Sessions() (*sticky.Table, string) { return f.sessions, "X-Session-Id" }

func targets(bs []*backends.Backend) []route.Target {
	ts := make([]route.Target, len(bs))
	for i, b := range bs {
		ts[i] = b
	}
	return ts
}

func newFleet(t *testing.T, urls []string, rc route.Config, pc pipeline.Config) *testFleet {
	t.Helper()
	f := &testFleet{stored: sticky.New(1000), sessions: sticky.New(1000)}
	pool, err := backends.NewPool(urls, backends.Options{
		OnState: func(*backends.Backend, backends.State) {
			if rt := f.router.Load(); rt != nil {
				rt.Refresh()
			}
		},
		OnMembership: func(bs []*backends.Backend) {
			if rt := f.router.Load(); rt != nil {
				if err := rt.SetTargets(targets(bs)); err != nil {
					t.Errorf("membership: %v", err)
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := route.NewTargets(rc, targets(pool.Backends()))
	if err != nil {
		t.Fatal(err)
	}
	f.pool = pool
	f.router.Store(rt)
	if f.pipe, err = pipeline.New(pc, rt); err != nil {
		t.Fatal(err)
	}
	return f
}

// newHarness serves a picker over a test fleet, or over what wrap (at most
// one) makes of it.
func newHarness(t *testing.T, rc route.Config, pc pipeline.Config, wrap ...func(*testFleet) Fleet) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", 3, vllmsim.Config{Preset: "tiny", Speed: 50})
	if err != nil {
		t.Fatal(err)
	}
	f := newFleet(t, fleet.URLs(), rc, pc)
	var pf Fleet = f
	for _, w := range wrap {
		pf = w(f)
	}
	p := New(pf, nil)
	grpcLn, healthLn := bufconn.Listen(1<<20), bufconn.Listen(1<<20)
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, Listeners{GRPC: grpcLn, Health: healthLn}, 5*time.Second) }()
	dial := func(ln *bufconn.Listener) *grpc.ClientConn {
		cc, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
		if err != nil {
			t.Fatal(err)
		}
		return cc
	}
	cc, hc := dial(grpcLn), dial(healthLn)
	t.Cleanup(func() {
		cc.Close()
		hc.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		fleet.Close()
	})
	h := &harness{fleet: f, client: extprocv3.NewExternalProcessorClient(cc), health: healthpb.NewHealthClient(hc)}
	for _, u := range fleet.URLs() {
		h.names = append(h.names, strings.TrimPrefix(u, "http://"))
	}
	// Ready once the backends were probed.
	for i := 0; ; i++ {
		r, err := h.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: extprocv3.ExternalProcessor_ServiceDesc.ServiceName})
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if i == 200 {
			t.Fatalf("picker never became ready: %v %v", r, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return h
}

func hdrs(path string, extra ...string) *extprocv3.HttpHeaders {
	hm := &corev3.HeaderMap{}
	add := func(k, v string) { hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)}) }
	add(":method", "POST")
	add(":path", path)
	add("content-type", "application/json")
	for i := 0; i+1 < len(extra); i += 2 {
		add(extra[i], extra[i+1])
	}
	return &extprocv3.HttpHeaders{Headers: hm}
}

func protocol(req, resp filterv3.ProcessingMode_BodySendMode) *extprocv3.ProtocolConfiguration {
	return &extprocv3.ProtocolConfiguration{RequestBodyMode: req, ResponseBodyMode: resp}
}

func chatBody(system, user string) []byte {
	b, _ := json.Marshal(map[string]any{"messages": []map[string]string{
		{"role": "system", "content": system}, {"role": "user", "content": user}}})
	return b
}

// headerValue finds k in a mutation.
func headerValue(m *extprocv3.HeaderMutation, k string) (string, bool) {
	for _, h := range m.GetSetHeaders() {
		if strings.EqualFold(h.GetHeader().GetKey(), k) {
			return string(h.GetHeader().GetRawValue()), true
		}
	}
	return "", false
}

func metaEndpoint(t *testing.T, r *extprocv3.ProcessingResponse) string {
	t.Helper()
	lb := r.GetDynamicMetadata().GetFields()[MetadataNamespace].GetStructValue()
	if lb == nil {
		t.Fatalf("no %s dynamic metadata in %v", MetadataNamespace, r)
	}
	return lb.GetFields()[DestinationHeader].GetStringValue()
}

func recv(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient) *extprocv3.ProcessingResponse {
	t.Helper()
	r, err := s.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return r
}

// buffered runs one request in BUFFERED mode up to the decision and
// returns the stream (still open) and the body response.
func (h *harness) buffered(t *testing.T, body []byte, meta *corev3.Metadata, extra ...string) (extprocv3.ExternalProcessor_ProcessClient, *extprocv3.ProcessingResponse) {
	t.Helper()
	s, err := h.client.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&extprocv3.ProcessingRequest{ProtocolConfig: protocol(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE),
		MetadataContext: meta,
		Request:         &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs("/v1/chat/completions", extra...)}}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, s); r.GetRequestHeaders() == nil || r.GetRequestHeaders().GetResponse().GetHeaderMutation() != nil {
		t.Fatalf("buffered headers answer = %v, want a plain headers response", r)
	}
	if err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}); err != nil {
		t.Fatal(err)
	}
	return s, recv(t, s)
}

func TestBufferedPicksByPrefixAndSendsTheCanonicalBody(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	var endpoints []string
	for i := range 6 {
		// Same system prompt, different user turns, with non-canonical
		// whitespace the backend should not see.
		body := []byte(strings.Replace(string(chatBody(strings.Repeat("You are a careful assistant. ", 200), "question "+strconv.Itoa(i))), `"messages":`, `  "messages" :  `, 1))
		s, r := h.buffered(t, body, nil)
		common := r.GetRequestBody().GetResponse()
		if common == nil {
			t.Fatalf("answer to the body = %v, want a body response", r)
		}
		dest, ok := headerValue(common.GetHeaderMutation(), DestinationHeader)
		if !ok || !slices.Contains(h.names, dest) {
			t.Fatalf("%s = %q, want one of %v", DestinationHeader, dest, h.names)
		}
		if m := metaEndpoint(t, r); m != dest {
			t.Fatalf("metadata endpoint %q differs from header %q", m, dest)
		}
		if !common.GetClearRouteCache() {
			t.Fatal("clear_route_cache not set")
		}
		for _, k := range []string{pipeline.BackendHeader, pipeline.DecisionHeader, pipeline.KeyHeader} {
			if v, ok := headerValue(common.GetHeaderMutation(), k); !ok || v == "" {
				t.Fatalf("decision header %s missing from %v", k, common.GetHeaderMutation())
			}
		}
		canonical := common.GetBodyMutation().GetBody()
		if len(canonical) == 0 || bytes.Contains(canonical, []byte("  ")) || !json.Valid(canonical) {
			t.Fatalf("body mutation = %q, want the canonical JSON", canonical)
		}
		if cl, _ := headerValue(common.GetHeaderMutation(), "content-length"); cl != strconv.Itoa(len(canonical)) {
			t.Fatalf("content-length = %q, want %d", cl, len(canonical))
		}
		endpoints = append(endpoints, dest)
		s.CloseSend()
		if _, err := s.Recv(); err == nil {
			t.Fatal("stream still open after CloseSend")
		}
	}
	for _, e := range endpoints[1:] {
		if e != endpoints[0] {
			t.Fatalf("requests sharing a prefix went to %v, want one endpoint", endpoints)
		}
	}
	waitInFlight(t, h, 0)
}

func waitInFlight(t *testing.T, h *harness, want int) {
	t.Helper()
	for i := 0; ; i++ {
		if got := h.fleet.Router().InFlight(); got == want {
			return
		}
		if i == 500 {
			t.Fatalf("router in flight = %d, want %d", h.fleet.Router().InFlight(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFullDuplexBodyLargerThanAChunk(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	body := chatBody(strings.Repeat("long shared context ", 8000), "summarize") // ~160 KB
	s, err := h.client.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mustSend := func(r *extprocv3.ProcessingRequest) {
		if err := s.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	mustSend(&extprocv3.ProcessingRequest{ProtocolConfig: protocol(filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED),
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs("/v1/chat/completions")}})
	// Chunks of 16 KiB, as a gateway streams them; nothing comes back until
	// the last.
	for off := 0; off < len(body); off += 16 << 10 {
		end := min(off+16<<10, len(body))
		mustSend(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body[off:end], EndOfStream: end == len(body)}}})
	}
	r := recv(t, s)
	hr := r.GetRequestHeaders().GetResponse()
	dest, ok := headerValue(hr.GetHeaderMutation(), DestinationHeader)
	if !ok || !slices.Contains(h.names, dest) || metaEndpoint(t, r) != dest || !hr.GetClearRouteCache() {
		t.Fatalf("first answer = %v, want the headers response with the destination", r)
	}
	var got []byte
	for {
		r := recv(t, s)
		sr := r.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			t.Fatalf("answer %v, want a streamed body response", r)
		}
		if len(sr.GetBody()) > ChunkSize {
			t.Fatalf("streamed chunk of %d bytes, above %d", len(sr.GetBody()), ChunkSize)
		}
		got = append(got, sr.GetBody()...)
		if sr.GetEndOfStream() {
			break
		}
	}
	if !json.Valid(got) || len(got) < 150000 {
		t.Fatalf("streamed body of %d bytes is not the canonical body", len(got))
	}
	if cl, _ := headerValue(hr.GetHeaderMutation(), "content-length"); cl != strconv.Itoa(len(got)) {
		t.Fatalf("content-length %q, body %d", cl, len(got))
	}
	waitInFlight(t, h, 1)
	// The response: headers, then a body in two chunks echoed back, with
	// usage in the last; the pick is released at its end.
	mustSend(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: ":status", RawValue: []byte("200")}, {Key: "content-type", RawValue: []byte("application/json")}}}}}})
	if r := recv(t, s); r.GetResponseHeaders() == nil {
		t.Fatalf("answer %v, want a response headers response", r)
	}
	resp := []byte(`{"id":"x","choices":[],"usage":{"prompt_tokens":40000,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":39984}}}`)
	for i, part := range [][]byte{resp[:20], resp[20:]} {
		mustSend(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: part, EndOfStream: i == 1}}})
		sr := recv(t, s).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if !bytes.Equal(sr.GetBody(), part) || sr.GetEndOfStream() != (i == 1) {
			t.Fatalf("response chunk %d echoed as %q eos=%v", i, sr.GetBody(), sr.GetEndOfStream())
		}
	}
	waitInFlight(t, h, 0)
	s.CloseSend()
}

func TestSubsetHint(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	subset := func(eps ...string) *corev3.Metadata {
		vals := make([]any, len(eps))
		for i, e := range eps {
			vals[i] = e
		}
		st, err := structpb.NewStruct(map[string]any{SubsetKey: vals})
		if err != nil {
			t.Fatal(err)
		}
		return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{SubsetNamespace: st}}
	}
	// Whatever the key's home, a one-member subset gets exactly that member.
	for i, only := range h.names {
		s, r := h.buffered(t, chatBody("subset prompt", strconv.Itoa(i)), subset(only))
		if dest, _ := headerValue(r.GetRequestBody().GetResponse().GetHeaderMutation(), DestinationHeader); dest != only {
			t.Fatalf("subset [%s] picked %q", only, dest)
		}
		s.CloseSend()
	}
	// A two-member subset: always one of the two.
	for i := range 10 {
		s, r := h.buffered(t, chatBody("subset prompt "+strconv.Itoa(i), "q"), subset(h.names[0], h.names[2]))
		if dest, _ := headerValue(r.GetRequestBody().GetResponse().GetHeaderMutation(), DestinationHeader); dest != h.names[0] && dest != h.names[2] {
			t.Fatalf("subset {%s,%s} picked %q", h.names[0], h.names[2], dest)
		}
		s.CloseSend()
	}
	// Empty or unknown: 503.
	for _, md := range []*corev3.Metadata{subset(), subset("10.255.255.1:8000")} {
		s, r := h.buffered(t, chatBody("x", "y"), md)
		if c := r.GetImmediateResponse().GetStatus().GetCode(); c != 503 {
			t.Fatalf("subset %v answered %v, want an immediate 503", md, r)
		}
		s.CloseSend()
	}
	waitInFlight(t, h, 0)
}

func TestSaturationIs429WithRetryAfter(t *testing.T) {
	h := newHarness(t, route.Config{DefaultThreshold: 1, QueueWait: 20 * time.Millisecond}, pipeline.Config{})
	var open []extprocv3.ExternalProcessor_ProcessClient
	for i := range 3 {
		s, r := h.buffered(t, chatBody("busy", strconv.Itoa(i)), nil)
		if r.GetRequestBody() == nil {
			t.Fatalf("request %d of 3 on 3 backends of threshold 1: %v", i, r)
		}
		open = append(open, s)
	}
	s, r := h.buffered(t, chatBody("busy", "one too many"), nil)
	ir := r.GetImmediateResponse()
	if ir.GetStatus().GetCode() != 429 {
		t.Fatalf("fourth request answered %v, want 429", r)
	}
	if ra, ok := headerValue(ir.GetHeaders(), "retry-after"); !ok || ra == "" {
		t.Fatalf("429 without Retry-After: %v", ir.GetHeaders())
	}
	if !json.Valid(ir.GetBody()) || !bytes.Contains(ir.GetBody(), []byte("saturated")) {
		t.Fatalf("429 body %q", ir.GetBody())
	}
	s.CloseSend()
	// Closing the streams (the gateway's request ended) releases the picks.
	for _, s := range open {
		s.CloseSend()
		_, _ = s.Recv()
	}
	waitInFlight(t, h, 0)
}

func TestServedEndpointCorrectsInFlight(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	s, r := h.buffered(t, chatBody("served", "q"), nil)
	picked, _ := headerValue(r.GetRequestBody().GetResponse().GetHeaderMutation(), DestinationHeader)
	other := h.names[0]
	if other == picked {
		other = h.names[1]
	}
	served, _ := structpb.NewStruct(map[string]any{ServedKey: other})
	if err := s.Send(&extprocv3.ProcessingRequest{MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{MetadataNamespace: served}},
		Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}}}}}}); err != nil {
		t.Fatal(err)
	}
	recv(t, s)
	load := map[string]int{}
	for _, st := range h.fleet.Router().Status() {
		load[st.Name] = st.InFlight
	}
	if load[other] != 1 || load[picked] != 0 {
		t.Fatalf("in flight after served=%s (picked %s): %v", other, picked, load)
	}
	s.CloseSend()
	_, _ = s.Recv()
	waitInFlight(t, h, 0)
}

func TestBadBodyIs400(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	s, r := h.buffered(t, []byte(`{"messages": [`), nil)
	ir := r.GetImmediateResponse()
	if ir.GetStatus().GetCode() != 400 || !bytes.Contains(ir.GetBody(), []byte("offset")) {
		t.Fatalf("truncated body answered %v, want 400 naming the offset", r)
	}
	s.CloseSend()
	waitInFlight(t, h, 0)
}

// TestBodyOverLimitNamesItsSetting: a body over the limit is 413, and the
// message says which setting raises the limit.
func TestBodyOverLimitNamesItsSetting(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{MaxBodyBytes: 2048, SettingName: func(f string) string { return "setting " + f }})
	s, r := h.buffered(t, chatBody("x", strings.Repeat("y", 4096)), nil)
	ir := r.GetImmediateResponse()
	if ir.GetStatus().GetCode() != 413 || !bytes.Contains(ir.GetBody(), []byte("raise it with setting MaxBodyBytes")) {
		t.Fatalf("body over the limit answered %v, want 413 naming the setting", r)
	}
	s.CloseSend()
	waitInFlight(t, h, 0)
}

func TestUsage(t *testing.T) {
	sse := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"prompt_tokens_details\":{\"cached_tokens\":16}}}\n\ndata: [DONE]\n\n")
	if p, c := usage(sse, true, true); p != 30 || c != 16 {
		t.Fatalf("SSE usage = %d, %d; want 30, 16", p, c)
	}
	if p, c := usage([]byte(`{"usage":{"prompt_tokens":5}}`), false, true); p != 5 || c != -1 {
		t.Fatalf("JSON usage = %d, %d; want 5, -1", p, c)
	}
	// A body kept only in part says nothing.
	if p, c := usage([]byte(`"prompt_tokens":5}}`), false, false); p != -1 || c != -1 {
		t.Fatalf("partial JSON usage = %d, %d; want -1, -1", p, c)
	}
}

func TestStreamedRequestBodiesAreRefused(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	s, err := h.client.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&extprocv3.ProcessingRequest{ProtocolConfig: protocol(filterv3.ProcessingMode_STREAMED, filterv3.ProcessingMode_NONE),
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs("/v1/chat/completions")}}); err != nil {
		t.Fatal(err)
	}
	ir := recv(t, s).GetImmediateResponse()
	if ir.GetStatus().GetCode() != 500 || !bytes.Contains(ir.GetBody(), []byte("STREAMED")) {
		t.Fatalf("STREAMED request body mode answered %v, want a 500 naming the mode", ir)
	}
}

func TestTenants(t *testing.T) {
	const key = "pk-test-0123456789abcdef"
	h := newHarness(t, route.Config{}, pipeline.Config{Tenants: map[string]string{key: "tenant-a"}, TenantSecret: []byte("a secret of 16+ bytes")})
	// No key: 401 from the picker.
	s, r := h.buffered(t, chatBody("tenant prompt", "q"), nil)
	if c := r.GetImmediateResponse().GetStatus().GetCode(); c != 401 {
		t.Fatalf("no API key answered %v, want 401", r)
	}
	s.CloseSend()
	// With the key: the backend gets no Authorization and a body with the
	// tenant's cache_salt.
	s, r = h.buffered(t, chatBody("tenant prompt", "q"), nil, "authorization", "Bearer "+key)
	common := r.GetRequestBody().GetResponse()
	if !slices.Contains(common.GetHeaderMutation().GetRemoveHeaders(), "authorization") {
		t.Fatalf("authorization not removed: %v", common.GetHeaderMutation())
	}
	if body := common.GetBodyMutation().GetBody(); !bytes.Contains(body, []byte(`"cache_salt":"`)) {
		t.Fatalf("tenant body without cache_salt: %s", body)
	}
	s.CloseSend()
	waitInFlight(t, h, 0)
}

func TestRequestWithoutBodyIsDecidedOnItsHeaders(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	s, err := h.client.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	get := hdrs("/v1/models")
	get.EndOfStream = true
	if err := s.Send(&extprocv3.ProcessingRequest{ProtocolConfig: protocol(filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED),
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: get}}); err != nil {
		t.Fatal(err)
	}
	r := recv(t, s)
	dest, ok := headerValue(r.GetRequestHeaders().GetResponse().GetHeaderMutation(), DestinationHeader)
	if !ok || !slices.Contains(h.names, dest) || metaEndpoint(t, r) != dest {
		t.Fatalf("GET answered %v, want the destination in the headers response", r)
	}
	if _, keyed := headerValue(r.GetRequestHeaders().GetResponse().GetHeaderMutation(), pipeline.KeyHeader); keyed {
		t.Fatal("a request without a body got a routing key")
	}
	// The response ends with its headers: the pick is released.
	if err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		EndOfStream: true, Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}}}}}}); err != nil {
		t.Fatal(err)
	}
	recv(t, s)
	waitInFlight(t, h, 0)
	s.CloseSend()
}

func TestTenantsGuardRequestsWithoutBody(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{Tenants: map[string]string{"pk-test-0123456789abcdef": "tenant-a"}, TenantSecret: []byte("a secret of 16+ bytes")})
	s, err := h.client.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	get := hdrs("/v1/models")
	get.EndOfStream = true
	if err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: get}}); err != nil {
		t.Fatal(err)
	}
	if c := recv(t, s).GetImmediateResponse().GetStatus().GetCode(); c != 401 {
		t.Fatalf("GET without an API key: status %d, want 401", c)
	}
}

func TestHealthServices(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	for _, name := range append(HealthServices, "no.such.Service") {
		r, err := h.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if name == "no.such.Service" {
			if err == nil {
				t.Fatalf("unknown service answered %v, want NOT_FOUND", r)
			}
			continue
		}
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q = %v, %v; want SERVING", name, r, err)
		}
	}
}

// A subset that leaves out the policy's own choice sends the request
// elsewhere; the prefix index must then record the prompt only at the
// member the request goes to, or later requests sharing the prefix follow
// a cache that is not there.
func TestSubsetIndexesOnlyTheMemberUsed(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	subset := func(ep string) *corev3.Metadata {
		st, err := structpb.NewStruct(map[string]any{SubsetKey: []any{ep}})
		if err != nil {
			t.Fatal(err)
		}
		return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{SubsetNamespace: st}}
	}
	// One shared document: after the first request its member holds the
	// prefix, so the policy's choice for the next ones is that member,
	// which their one-member subsets leave out.
	doc := strings.Repeat("A document that every request of this test begins with. ", 40)
	for i, only := range h.names {
		before, ok := h.fleet.Router().IndexStats()
		if !ok {
			t.Fatal("the default policy keeps no prefix index")
		}
		s, r := h.buffered(t, chatBody(doc, "question "+strconv.Itoa(i)), subset(only))
		if dest, _ := headerValue(r.GetRequestBody().GetResponse().GetHeaderMutation(), DestinationHeader); dest != only {
			t.Fatalf("subset [%s] picked %q", only, dest)
		}
		after, _ := h.fleet.Router().IndexStats()
		for _, name := range h.names {
			if name != only && after.MemberEntries[name] != before.MemberEntries[name] {
				t.Errorf("request %d, subset [%s]: %s's index entries went from %d to %d; the request never goes there",
					i, only, name, before.MemberEntries[name], after.MemberEntries[name])
			}
		}
		if after.MemberEntries[only] <= before.MemberEntries[only] {
			t.Errorf("request %d: %s, where it goes, gained no index entries (%d)", i, only, after.MemberEntries[only])
		}
		s.CloseSend()
	}
	waitInFlight(t, h, 0)
}

// TestErrorBodyIsJSON: a refusal's body is valid JSON in OpenAI's shape
// (param included, as serve writes it) whatever bytes its message holds.
func TestErrorBodyIsJSON(t *testing.T) {
	for _, msg := range []string{"plain", "del \x7f", "bad utf-8 \xff", "nul \x00", "line sep \u2028"} {
		e := &pipeline.Error{Status: 400, Code: "bad", Message: msg}
		body := errorBody(e)
		var got struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    string  `json:"code"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Errorf("message %q: body %s is not JSON: %v", msg, body, err)
			continue
		}
		if want := strings.ToValidUTF8(msg, "\uFFFD"); got.Error.Message != want || got.Error.Code != "bad" || got.Error.Type != "invalid_request_error" {
			t.Errorf("message %q: body %s", msg, body)
		}
		if !bytes.Contains(body, []byte(`"param":null`)) {
			t.Errorf("message %q: body %s has no param: null", msg, body)
		}
	}
}
