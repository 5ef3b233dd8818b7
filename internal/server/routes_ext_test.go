package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/internal/server"
)

// routeBody is a valid body of a JSON route whose routing text begins
// with doc and ends with q, under the native keying and under a mode of
// the route's own.
func routeBody(path, doc, q string) []byte {
	var v map[string]any
	switch path {
	case "/v1/messages":
		v = map[string]any{"max_tokens": 4, "messages": []any{map[string]any{"role": "user", "content": doc + q}}}
	case "/score", "/v1/score":
		v = map[string]any{"text_1": doc, "text_2": q}
	case "/rerank", "/v1/rerank", "/v2/rerank":
		v = map[string]any{"query": doc, "documents": []any{doc + q}}
	case "/v1/chat/completions":
		v = map[string]any{"max_tokens": 4, "messages": []any{map[string]any{"role": "user", "content": doc + q}}}
	case "/v1/completions":
		v = map[string]any{"max_tokens": 4, "prompt": doc + q}
	case "/tokenize":
		v = map[string]any{"prompt": doc + q}
	case "/detokenize":
		v = map[string]any{"tokens": []int{1, 2, 3}}
	case "/v1/responses":
		v = map[string]any{"input": doc + q, "max_output_tokens": 4}
	case "/invocations":
		v = map[string]any{"inputs": doc + q, "parameters": map[string]any{"max_new_tokens": 4}}
	default: // embeddings and pooling
		v = map[string]any{"input": doc + q}
	}
	v["model"] = simModel
	b, _ := json.Marshal(v)
	return b
}

var newJSONRoutes = []string{"/v1/responses", "/v1/messages", "/v1/embeddings", "/pooling", "/classify", "/score", "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank"}

// TestNewJSONRoutesKeyAndRouteLikeChat: each new JSON route is answered by
// a replica, equal bodies get equal keys, a different document a
// different key, and bodies sharing a long document go to one replica.
func TestNewJSONRoutesKeyAndRouteLikeChat(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	for i, path := range newJSONRoutes {
		t.Run(path, func(t *testing.T) {
			doc := strings.Repeat(fmt.Sprintf("document %d of route %s says many things. ", i, path), 60)
			post := func(b []byte) (string, string) {
				status, hdr, raw := call(t, "POST", base+path, "application/json", b, nil)
				if status != http.StatusOK {
					t.Fatalf("status %d: %s", status, raw)
				}
				return hdr.Get(server.KeyHeader), hdr.Get(server.BackendHeader)
			}
			k1, b1 := post(routeBody(path, doc, "first question?"))
			k1again, _ := post(routeBody(path, doc, "first question?"))
			_, b2 := post(routeBody(path, doc, "second question?"))
			kOther, _ := post(routeBody(path, "another document entirely. "+doc, "first question?"))
			if k1 == "" || k1 != k1again {
				t.Errorf("equal bodies: keys %q and %q", k1, k1again)
			}
			if kOther == k1 {
				t.Errorf("a different document has the same key %s", k1)
			}
			if b1 != b2 {
				t.Errorf("bodies sharing a long document went to %s and %s", b1, b2)
			}
		})
	}
}

// countingFleet starts k replicas, each behind a proxy that counts the
// requests other than the pool's probes (/health, /metrics, /v1/models,
// and the engine info endpoints /props, /get_server_info, /server_info).
func countingFleet(t *testing.T, k int) (urls []string, seen *atomic.Int64) {
	t.Helper()
	fleet, err := vllmsim.StartFleet(t.Context(), "127.0.0.1:0", k, vllmsim.Config{Preset: "tiny", Speed: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Close() })
	seen = new(atomic.Int64)
	for _, u := range fleet.URLs() {
		target, _ := url.Parse(u)
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/health", "/metrics", "/v1/models", "/props", "/get_server_info", "/server_info":
			default:
				seen.Add(1)
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return urls, seen
}

// errorOf reads an error body in shape, returning its type and whether
// the body has that shape.
func errorOf(raw []byte, shape routes.ErrorShape) (string, bool) {
	if shape == routes.AnthropicErrors {
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		return e.Error.Type, json.Unmarshal(raw, &e) == nil && e.Type == "error" && e.Error.Message != ""
	}
	var e struct {
		Error struct {
			Message, Type string
			Code          *string
		} `json:"error"`
	}
	return e.Error.Type, json.Unmarshal(raw, &e) == nil && e.Error.Message != "" && e.Error.Code != nil
}

// TestEveryPathRefusesBeforeTheBackend: with tenants configured, every
// route answers a request without a key 401, and every JSON route an
// oversized body 413 and an invalid body 400, each in the route's error
// shape, and no replica sees any of them.
func TestEveryPathRefusesBeforeTheBackend(t *testing.T) {
	urls, seen := countingFleet(t, 2)
	const key = "a-tenant-key-of-sixteen+"
	cfg := server.Config{Backends: urls, Pipeline: pipeline.Config{MaxBodyBytes: 64 << 10,
		Tenants: map[string]string{key: "acme"}, TenantSecret: []byte("a secret of sixteen bytes or more")}}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := serveFor(t, srv)
	auth := map[string]string{"Authorization": "Bearer " + key}
	check := func(rt routes.Route, what string, status int, raw []byte, want int, wantType string) {
		t.Helper()
		typ, ok := errorOf(raw, rt.Errors)
		if status != want || !ok || (rt.Errors == routes.AnthropicErrors && typ != wantType) {
			t.Errorf("%s %s, %s: status %d (want %d), body %s (want %s's shape)", rt.Methods, rt.Path, what, status, want, raw, rt.Errors)
		}
	}
	for _, rt := range routes.All() {
		method, _, _ := strings.Cut(rt.Methods, ",")
		path := strings.ReplaceAll(rt.Path, "{id}", "resp_1")
		status, _, raw := call(t, method, base+path, "application/json", []byte(`{}`), nil)
		check(rt, "no key", status, raw, http.StatusUnauthorized, "authentication_error")
		if rt.Body != routes.JSONBody {
			continue
		}
		big := append([]byte(`{"model":"`+simModel+`","input":"`), bytes.Repeat([]byte("a"), 65<<10)...)
		status, _, raw = call(t, method, base+path, "application/json", append(big, `"}`...), auth)
		check(rt, "oversized body", status, raw, http.StatusRequestEntityTooLarge, "request_too_large")
		status, _, raw = call(t, method, base+path, "application/json", []byte(`{"model": "m", "input": [1,}`), auth)
		check(rt, "invalid body", status, raw, http.StatusBadRequest, "invalid_request_error")
		if !bytes.Contains(raw, []byte("offset")) && !bytes.Contains(raw, []byte("byte")) {
			t.Errorf("%s: invalid body's message names no offset: %s", rt.Path, raw)
		}
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("the replicas saw %d refused requests", n)
	}
	// The same keyed request does reach a replica.
	if status, _, raw := call(t, "POST", base+"/v1/messages", "application/json", routeBody("/v1/messages", "d", "q"), auth); status != http.StatusOK || seen.Load() != 1 {
		t.Errorf("keyed request: status %d, replicas saw %d: %s", status, seen.Load(), raw)
	}
}

// TestTokenizerVersionAndModels: tokenize and detokenize are answered by a
// replica serving the model, /version by any, and /v1/models keeps vLLM's
// fields.
func TestTokenizerVersionAndModels(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	status, hdr, raw := call(t, "POST", base+"/tokenize", "application/json", routeBody("/tokenize", "hello ", "world"), nil)
	var tok struct {
		Tokens []int `json:"tokens"`
	}
	if status != http.StatusOK || hdr.Get(server.BackendHeader) == "" || json.Unmarshal(raw, &tok) != nil || len(tok.Tokens) == 0 {
		t.Fatalf("/tokenize: status %d: %s", status, raw)
	}
	detok, _ := json.Marshal(map[string]any{"model": simModel, "tokens": tok.Tokens})
	if status, _, raw := call(t, "POST", base+"/detokenize", "application/json", detok, nil); status != http.StatusOK || !bytes.Contains(raw, []byte("hello world")) {
		t.Errorf("/detokenize: status %d: %s", status, raw)
	}
	status, _, raw = call(t, "POST", base+"/tokenize", "application/json", []byte(`{"model":"no-such-model","prompt":"x"}`), nil)
	if status != http.StatusNotFound {
		t.Errorf("tokenize for a model nobody serves: status %d: %s", status, raw)
	}
	if status, _, raw := call(t, "GET", base+"/version", "", nil, nil); status != http.StatusOK || !bytes.Contains(raw, []byte(`"version"`)) {
		t.Errorf("/version: status %d: %s", status, raw)
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	for deadline := time.Now().Add(5 * time.Second); len(list.Data) == 0 && time.Now().Before(deadline); {
		_, _, raw = call(t, "GET", base+"/v1/models", "", nil, nil)
		_ = json.Unmarshal(raw, &list)
	}
	if len(list.Data) != 1 {
		t.Fatalf("models: %s", raw)
	}
	for _, f := range []string{"id", "created", "owned_by", "root", "parent", "max_model_len"} {
		if _, ok := list.Data[0][f]; !ok {
			t.Errorf("the merged model entry lacks %s: %s", f, raw)
		}
	}
}

// TestExplainTakesAnyJSONRoute: /v1/explain takes a route's body with its
// path, as a query parameter or wrapped; both explain it alike.
func TestExplainTakesAnyJSONRoute(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	body := routeBody("/v1/messages", "a document. ", "a question")
	explain := func(url string, b []byte) map[string]any {
		status, _, raw := call(t, "POST", url, "application/json", b, nil)
		var out map[string]any
		if status != http.StatusOK || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("%s: status %d: %s", url, status, raw)
		}
		return out
	}
	q := explain(base+"/v1/explain?path=/v1/messages", body)
	w := explain(base+"/v1/explain", []byte(`{"path":"/v1/messages","body":`+string(body)+`}`))
	if q["key"] != w["key"] || q["backend"] != w["backend"] || q["key"] == "" {
		t.Errorf("query form %v, wrapped form %v", q, w)
	}
	_, hdr, _ := call(t, "POST", base+"/v1/messages", "application/json", body, nil)
	if hdr.Get(server.KeyHeader) != q["key"] {
		t.Errorf("explain's key %v, the request's %s", q["key"], hdr.Get(server.KeyHeader))
	}
	if status, _, raw := call(t, "POST", base+"/v1/explain?path=/v1/models", "application/json", body, nil); status != http.StatusBadRequest {
		t.Errorf("explain for a route without a JSON body: status %d: %s", status, raw)
	}
}

// TestUnknownPathsShareOneLabel: paths the table lacks are one route label.
func TestUnknownPathsShareOneLabel(t *testing.T) {
	base := startRouter(t, 1, server.Config{})
	for i := range 5 {
		if status, _, _ := call(t, "GET", fmt.Sprintf("%s/nope/%d", base, i), "", nil, nil); status != http.StatusNotFound {
			t.Fatalf("status %d", status)
		}
	}
	_, _, raw := call(t, "GET", base+"/metrics", "", nil, nil)
	if !bytes.Contains(raw, []byte(`prefixgate_requests_total{backend="",code="404",decision="",route="other"} 5`)) {
		t.Errorf("metrics lack the other route's 5 requests")
	}
}

// TestMessagesErrorsAreAnthropics: the router's own 404 (unknown model)
// and 503 (no healthy backend) on /v1/messages are in Anthropic's shape,
// and the same on chat in OpenAI's.
func TestMessagesErrorsAreAnthropics(t *testing.T) {
	base := startRouter(t, 1, server.Config{})
	body := []byte(`{"model":"no-such-model","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`)
	status, _, raw := call(t, "POST", base+"/v1/messages", "application/json", body, nil)
	if typ, ok := errorOf(raw, routes.AnthropicErrors); status != http.StatusNotFound || !ok || typ != "not_found_error" {
		t.Errorf("unknown model on /v1/messages: status %d: %s", status, raw)
	}
	status, _, raw = call(t, "POST", base+"/v1/chat/completions", "application/json", body, nil)
	if _, ok := errorOf(raw, routes.OpenAIErrors); status != http.StatusNotFound || !ok {
		t.Errorf("unknown model on chat: status %d: %s", status, raw)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	srv, err := server.New(server.Config{Backends: []string{dead}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base = serveFor(t, srv)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		status, _, raw = call(t, "POST", base+"/v1/messages", "application/json", routeBody("/v1/messages", "d", "q"), nil)
		if status == http.StatusServiceUnavailable {
			break
		}
	}
	if typ, ok := errorOf(raw, routes.AnthropicErrors); status/100 != 5 || !ok || (status == 503 && typ != "overloaded_error") {
		t.Errorf("no healthy backend on /v1/messages: status %d: %s", status, raw)
	}
}

// TestAccessLogNamesTheRoute: each request's log line carries its route's
// label, the stored-response paths' whatever their id.
func TestAccessLogNamesTheRoute(t *testing.T) {
	urls, _ := countingFleet(t, 1)
	var logs syncBuffer
	srv, err := server.New(server.Config{Backends: urls}, slog.New(server.NewLogHandler(&logs, slog.LevelInfo, false)))
	if err != nil {
		t.Fatal(err)
	}
	base := serveFor(t, srv)
	call(t, "POST", base+"/v1/embeddings", "application/json", routeBody("/v1/embeddings", "d", "q"), nil)
	call(t, "GET", base+"/v1/responses/resp_x", "", nil, nil)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(logs.String(), "route=embeddings") && strings.Contains(logs.String(), "route=responses_get") {
			return
		}
	}
	t.Errorf("the access log lacks the routes' labels:\n%s", logs.String())
}
