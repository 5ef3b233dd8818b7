package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/server"
)

// capture is a backend that records the bodies it receives and answers like
// an OpenAI server.
type capture struct {
	mu     sync.Mutex
	bodies []string
}

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		return
	case "/v1/models":
		io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		return
	}
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.bodies = append(c.bodies, string(b))
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
}

func TestTenantIsolation(t *testing.T) {
	backend := &capture{}
	hs := httptest.NewServer(backend)
	defer hs.Close()
	srv, err := server.New(server.Config{
		Backends: []string{hs.URL},
		Pipeline: pipeline.Config{Tenants: map[string]string{"key-of-tenant-a-000": "a", "key-of-tenant-b-000": "b"}, TenantSecret: []byte("a server secret of enough length")},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	router := httptest.NewServer(srv.Handler())
	defer router.Close()
	send := func(apiKey, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, router.URL+"/v1/chat/completions", strings.NewReader(body))
		if apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+apiKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	const prompt = `{"model":"m","messages":[{"role":"user","content":"the same prompt"}]}`
	ra, rb := send("key-of-tenant-a-000", prompt), send("key-of-tenant-b-000", prompt)
	if ra.StatusCode != 200 || rb.StatusCode != 200 {
		t.Fatalf("status %d and %d", ra.StatusCode, rb.StatusCode)
	}
	if ra.Header.Get(server.KeyHeader) == rb.Header.Get(server.KeyHeader) {
		t.Errorf("two tenants, same prompt: same key %s", ra.Header.Get(server.KeyHeader))
	}
	// A tenant that sends the other's salt still gets its own.
	rc := send("key-of-tenant-b-000", `{"model":"m","messages":[{"role":"user","content":"the same prompt"}],"cache_salt":"mine"}`)
	if rc.StatusCode != 200 {
		t.Fatalf("status %d", rc.StatusCode)
	}
	backend.mu.Lock()
	defer backend.mu.Unlock()
	if len(backend.bodies) != 3 {
		t.Fatalf("backend saw %d bodies; want 3", len(backend.bodies))
	}
	salts := map[string]bool{}
	for _, b := range backend.bodies {
		s := gjson.Get(b, "cache_salt").String()
		if len(s) != 32 || s == "mine" {
			t.Errorf("cache_salt %q in %s: want a 32-digit MAC", s, b)
		}
		salts[s] = true
	}
	if len(salts) != 3 {
		t.Errorf("want three different salts (a, b, b with its own salt); got %v", salts)
	}
	if r := send("", prompt); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("no API key: status %d; want 401", r.StatusCode)
	}
	if r := send("key-of-nobody-00000", prompt); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown API key: status %d; want 401", r.StatusCode)
	}
}

// TestDrainFinishesStream starts a stream, asks the server to stop, and
// checks that the stream still ends with [DONE] and Serve returns cleanly
// while new connections are refused.
func TestDrainFinishesStream(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer backend.Close()
	srv, err := server.New(server.Config{Backends: []string{backend.URL}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, 30*time.Second) }()
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 16)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	cancel() // SIGTERM's effect: stop accepting, drain.
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v with a stream in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("stream ended %q; want [DONE]", rest)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after drain: %v", err)
	}
}

// TestTenantBodyMustBeObject: with tenants, a native body that is not an
// object has nowhere to carry its cache_salt (400 not_an_object); a chat
// body that is not an object is still the schema error it always was.
func TestTenantBodyMustBeObject(t *testing.T) {
	hs := httptest.NewServer(&capture{})
	defer hs.Close()
	srv, err := server.New(server.Config{
		Backends: []string{hs.URL},
		Pipeline: pipeline.Config{Tenants: map[string]string{"key-of-tenant-a-000": "a"}, TenantSecret: []byte("a server secret of enough length")},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	router := httptest.NewServer(srv.Handler())
	defer router.Close()
	for _, c := range []struct{ path, body, code string }{
		{"/invocations", `[1,2]`, `"not_an_object"`},
		{"/v1/chat/completions", `[1,2]`, `"schema"`},
		{"/invocations", `[1,`, `"unexpected-end"`},
	} {
		req, _ := http.NewRequest(http.MethodPost, router.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer key-of-tenant-a-000")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.code) {
			t.Errorf("%s %s: %d %s, want 400 with %s", c.path, c.body, resp.StatusCode, b, c.code)
		}
	}
}
