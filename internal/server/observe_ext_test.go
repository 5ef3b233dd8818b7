package server_test

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/prefixgate/prefixgate/internal/server"
)

// TestTracingAndRequestID sends a request that carries a traceparent and
// checks that the router exports its spans over OTLP in the caller's trace,
// passes the trace on to the backend, and gives the request an id.
func TestTracingAndRequestID(t *testing.T) {
	var mu sync.Mutex
	var spans []string
	var traceIDs []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("collector: %v", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					spans = append(spans, sp.GetName())
					traceIDs = append(traceIDs, hex.EncodeToString(sp.GetTraceId()))
				}
			}
		}
	}))
	defer collector.Close()

	var gotParent, gotID string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		gotParent, gotID = r.Header.Get("Traceparent"), r.Header.Get(server.RequestIDHeader)
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	}))
	defer backend.Close()

	srv, err := server.New(server.Config{Backends: []string{backend.URL}, TraceEndpoint: collector.URL},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, 5*time.Second) }()

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get(server.RequestIDHeader)
	if len(id) != 16 || gotID != id {
		t.Errorf("request id: answer %q, backend saw %q; want the same 16 hex digits", id, gotID)
	}
	if !strings.Contains(gotParent, traceID) || strings.Contains(gotParent, "00f067aa0ba902b7") {
		t.Errorf("backend traceparent %q: want the caller's trace with the router's span as parent", gotParent)
	}
	cancel() // Serve flushes the exporter on the way out.
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"POST /v1/chat/completions", "normalize", "route and forward"} {
		found := false
		for _, s := range spans {
			found = found || s == want
		}
		if !found {
			t.Errorf("spans %v lack %q", spans, want)
		}
	}
	for _, got := range traceIDs {
		if got != traceID {
			t.Errorf("span in trace %s; want the caller's %s", got, traceID)
		}
	}
}

// TestTraceContextPassesThroughWithoutTracing checks that without an OTLP
// endpoint, where the router builds no spans, the caller's traceparent and
// tracestate still reach the backend unchanged and the request id is set.
func TestTraceContextPassesThroughWithoutTracing(t *testing.T) {
	var gotParent, gotState, gotID string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		gotParent, gotState, gotID = r.Header.Get("Traceparent"), r.Header.Get("Tracestate"), r.Header.Get(server.RequestIDHeader)
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	}))
	defer backend.Close()
	srv, err := server.New(server.Config{Backends: []string{backend.URL}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(srv.Handler())
	defer front.Close()
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequest(http.MethodPost, front.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Traceparent", parent)
	req.Header.Set("Tracestate", "vendor=1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if gotParent != parent || gotState != "vendor=1" {
		t.Errorf("backend saw traceparent %q, tracestate %q; want the caller's %q, %q", gotParent, gotState, parent, "vendor=1")
	}
	if id := resp.Header.Get(server.RequestIDHeader); len(id) != 16 || gotID != id {
		t.Errorf("request id: answer %q, backend saw %q; want the same 16 hex digits", id, gotID)
	}
}

// TestRequestIDsDistinct: ids made for requests that send none, on
// connections served at once (so on different threads, whose generators
// are separate), are 16 hex digits (docs/configuration.md) and never
// repeat.
func TestRequestIDsDistinct(t *testing.T) {
	addr := frontRouterWith(t, server.Config{Backends: []string{answeringBackend(t).URL}})
	const conns, each = 8, 250
	ids := make([][]string, conns)
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
			for range each {
				resp, err := client.Get("http://" + addr + "/healthz")
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ids[c] = append(ids[c], resp.Header.Get(server.RequestIDHeader))
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, list := range ids {
		for _, id := range list {
			if _, err := hex.DecodeString(id); len(id) != 16 || err != nil {
				t.Fatalf("request id %q: want 16 hex digits", id)
			}
			if seen[id] {
				t.Fatalf("request id %s given twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != conns*each {
		t.Fatalf("%d ids for %d requests", len(seen), conns*each)
	}
}
