package server_test

import (
	"context"
	"github.com/prefixgate/prefixgate/route"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/server"
)

// blockingBackend holds every completion until release is closed.
func blockingBackend(t *testing.T, release chan struct{}) *httptest.Server {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	}))
	t.Cleanup(hs.Close)
	return hs
}

func TestSaturationAndTimeout(t *testing.T) {
	release := make(chan struct{})
	backend := blockingBackend(t, release)
	srv, err := server.New(server.Config{
		Backends: []string{backend.URL}, Route: route.Config{DefaultThreshold: 1, QueueWait: 20 * time.Millisecond}, RequestTimeout: 2 * time.Second,
		FlowControl: flowgate.Config{Enabled: new(false)}, // the router's own bounded wait
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	router := httptest.NewServer(srv.Handler())
	defer router.Close()
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(router.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	// Wait until the first request holds the only slot.
	admin := prefixgatev1connect.NewAdminServiceClient(http.DefaultClient, router.URL)
	for {
		res, err := admin.ListBackends(context.Background(), connect.NewRequest(&pb.ListBackendsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Msg.GetBackends()[0].GetInFlight() == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	resp, err := http.Post(router.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(msg), "rate_limit_error") {
		t.Errorf("second request with the only slot taken: %d, Retry-After %q, %s; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), msg)
	}
	// The same over Connect is ResourceExhausted.
	client := prefixgatev1connect.NewInferenceServiceClient(http.DefaultClient, router.URL)
	_, err = client.Chat(context.Background(), connect.NewRequest(&pb.ChatRequest{Input: &pb.ChatInput{Model: "m", Messages: []*pb.Message{{Role: "user", Content: "hi"}}}}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("Chat while saturated: %v; want ResourceExhausted", err)
	}
	close(release)
	if got := <-first; got != 200 {
		t.Errorf("first request: %d; want 200", got)
	}
}

func TestRequestTimeoutIs504(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	backend := blockingBackend(t, release)
	srv, err := server.New(server.Config{Backends: []string{backend.URL}, RequestTimeout: 50 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	router := httptest.NewServer(srv.Handler())
	defer router.Close()
	resp, err := http.Post(router.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(msg), "timed out") {
		t.Errorf("hanging backend: %d %s; want 504", resp.StatusCode, msg)
	}
}
