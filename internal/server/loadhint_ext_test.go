package server_test

import (
	"context"
	"fmt"
	"github.com/prefixgate/prefixgate/route"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// metricsBackend answers like a vLLM replica whose /metrics reports running
// requests (sent by other routers).
func metricsBackend(t *testing.T, running int) *httptest.Server {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		case "/metrics":
			fmt.Fprintf(w, "vllm:num_requests_running{model_name=\"m\"} %d.0\nvllm:num_requests_waiting{model_name=\"m\"} 0.0\n", running)
		default:
			io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
		}
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestScrapedLoadSteersRouting: a backend that other routers have filled to
// its threshold (as its /metrics says) gets no more requests from this one.
func TestScrapedLoadSteersRouting(t *testing.T) {
	busy, idle := metricsBackend(t, 1000), metricsBackend(t, 0)
	srv, err := server.New(server.Config{Backends: []string{busy.URL, idle.URL}, Route: route.Config{DefaultThreshold: 64}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	router := httptest.NewServer(srv.Handler())
	defer router.Close()
	// Serve runs the probes, scrapes and hint loop; drive it on a listener.
	stop := serveInBackground(t, srv)
	defer stop()

	idleName := strings.TrimPrefix(idle.URL, "http://")
	allIdle := func() bool {
		for i := range 16 {
			body := fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":"document %d"},{"role":"user","content":"q"}]}`, i)
			resp, err := http.Post(router.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if resp.Header.Get(server.BackendHeader) != idleName {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(20 * time.Second); !allIdle(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("requests still reach the backend whose scraped load is past its threshold")
		}
	}
}

// serveInBackground runs srv.Serve on a loopback listener, which also runs
// its probes, scrapes and load hints, until the returned stop is called.
func serveInBackground(t *testing.T, srv *server.Server) func() {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, time.Second) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
}
