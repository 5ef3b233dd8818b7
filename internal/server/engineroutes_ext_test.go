package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/internal/server"
)

// serveBackends starts the router in front of the given backend specs and
// returns its base URL once it is ready.
func serveBackends(t *testing.T, specs []string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(server.Config{Backends: specs}, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	})
	return "http://" + ln.Addr().String()
}

// unservedRequest is a request on rt as a client would send it.
func unservedRequest(rt *routes.Route) (method, path, contentType string, body []byte) {
	method, _, _ = strings.Cut(rt.Methods, ",")
	path = strings.ReplaceAll(rt.Path, "{id}", "resp_0123")
	switch rt.Body {
	case routes.JSONBody:
		return method, path, "application/json", routeBody(rt.Path, "a document. ", "a question?")
	case routes.MultipartBody:
		form := "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + simModel + "\r\n--b--\r\n"
		return method, path, "multipart/form-data; boundary=b", []byte(form)
	}
	return method, path, "", nil
}

// TestUnservedPathRefusedNamingEngine: behind a fleet whose every backend
// is configured as llama.cpp, each path llama-server does not serve is a
// 501 endpoint_not_supported in the route's error shape that names the
// path and the engine, and nothing reaches a replica; the paths it serves
// are forwarded, and a fleet with one vLLM backend forwards them all.
func TestUnservedPathRefusedNamingEngine(t *testing.T) {
	urls, seen := countingFleet(t, 2)
	base := serveBackends(t, []string{"llamacpp+" + urls[0], "llamacpp+" + urls[1]})
	waitReady(t, base)
	refused := 0
	for _, rt := range routes.All() {
		if backends.EngineLlamaCpp.Serves(rt.Path) {
			continue
		}
		refused++
		method, path, ct, body := unservedRequest(&rt)
		status, _, raw := call(t, method, base+path, ct, body, nil)
		typ, ok := errorOf(raw, rt.Errors)
		if status != http.StatusNotImplemented || !ok {
			t.Errorf("%s %s: status %d, want 501 in %s shape: %s", method, path, status, rt.Errors, raw)
			continue
		}
		msg := string(raw)
		if !strings.Contains(msg, "llama.cpp's llama-server does not serve "+rt.Path) {
			t.Errorf("%s %s: the error does not name the engine and the path: %s", method, path, raw)
		}
		if rt.Errors == routes.OpenAIErrors && !strings.Contains(msg, `"code":"endpoint_not_supported"`) {
			t.Errorf("%s %s: code is not endpoint_not_supported: %s (type %s)", method, path, raw, typ)
		}
	}
	if refused < 5 || seen.Load() != 0 {
		t.Fatalf("%d paths refused, %d requests reached a replica", refused, seen.Load())
	}
	for _, path := range []string{"/v1/embeddings", "/tokenize", "/v1/chat/completions"} {
		status, _, raw := call(t, "POST", base+path, "application/json", routeBody(path, "a document. ", "a question?"), nil)
		if status != http.StatusOK {
			t.Errorf("%s, served by llama-server: status %d: %s", path, status, raw)
		}
	}
	mixed := serveBackends(t, []string{"llamacpp+" + urls[0], "vllm+" + urls[1]})
	waitReady(t, mixed)
	for _, path := range []string{"/pooling", "/v1/score"} {
		status, _, raw := call(t, "POST", mixed+path, "application/json", routeBody(path, "a document. ", "a question?"), nil)
		if status == http.StatusNotImplemented {
			t.Errorf("%s with a vLLM backend in the fleet: refused: %s", path, raw)
		}
	}
	// A least-loaded route goes only to a backend whose engine serves it.
	vllmHost := strings.TrimPrefix(urls[1], "http://")
	for range 6 {
		status, hdr, raw := call(t, "GET", mixed+"/version", "", nil, nil)
		if status != http.StatusOK || !strings.Contains(hdr.Get(server.BackendHeader), vllmHost) {
			t.Fatalf("GET /version in a llama.cpp and vLLM fleet: status %d from %q, want 200 from %s: %s", status, hdr.Get(server.BackendHeader), vllmHost, raw)
		}
	}
}

// waitReady polls base's /readyz until it answers 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	for range 500 {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s not ready", base)
}
