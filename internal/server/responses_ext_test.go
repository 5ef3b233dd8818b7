package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/server"
)

const simModel = "vllmsim/tiny"

// respond sends one Responses request, plain or streamed, and returns the
// response's id and the backend that answered.
func respond(t *testing.T, base string, body map[string]any, stream bool) (status int, id, backend string, raw []byte) {
	t.Helper()
	body["stream"] = stream
	b, _ := json.Marshal(body)
	resp, err := http.Post(base+"/v1/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Error(err)
		return 0, "", "", nil
	}
	defer resp.Body.Close()
	backend = resp.Header.Get(server.BackendHeader)
	if !stream || resp.StatusCode != http.StatusOK {
		var out struct {
			ID string `json:"id"`
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		_ = json.Unmarshal(buf.Bytes(), &out)
		return resp.StatusCode, out.ID, backend, buf.Bytes()
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		if ok && json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "response.created" {
			id = ev.Response.ID
		}
	}
	return resp.StatusCode, id, backend, nil
}

// TestResponsesChainsStayOnTheirReplica: 20 conversations of 10
// follow-ups by previous_response_id over 3 replicas, half of them
// streamed: every follow-up is answered, on the replica that stored its
// predecessor.
func TestResponsesChainsStayOnTheirReplica(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	var wg sync.WaitGroup
	for c := range 20 {
		wg.Go(func() {
			prev, where := "", ""
			for turn := range 11 {
				body := map[string]any{"model": simModel, "input": fmt.Sprintf("conversation %d turn %d: say something", c, turn), "max_output_tokens": 4}
				if prev != "" {
					body["previous_response_id"] = prev
				}
				status, id, backend, raw := respond(t, base, body, c%2 == 1)
				if status != http.StatusOK || id == "" {
					t.Errorf("conversation %d turn %d: status %d, id %q: %s", c, turn, status, id, raw)
					return
				}
				if prev != "" && backend != where {
					t.Errorf("conversation %d turn %d: on %s, its predecessor is stored on %s", c, turn, backend, where)
				}
				prev, where = id, backend
			}
		})
	}
	wg.Wait()
}

// TestResponsesUnknownIDIsNotFound: an id the router never saw is a 404
// in OpenAI's shape naming previous_response_id, on a follow-up, a GET and
// a cancel; a known one is served by the replica that stored it.
func TestResponsesUnknownIDIsNotFound(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	status, _, _, raw := respond(t, base, map[string]any{"model": simModel, "input": "hi", "previous_response_id": "resp_unknown"}, false)
	var e struct {
		Error struct {
			Type, Param, Code string
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || status != http.StatusNotFound ||
		e.Error.Type != "invalid_request_error" || e.Error.Param != "previous_response_id" || e.Error.Code != "response_not_found" {
		t.Fatalf("unknown previous_response_id: status %d, body %s", status, raw)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/responses/resp_unknown"}, {"POST", "/v1/responses/resp_unknown/cancel"}} {
		if status, _, raw := call(t, c.method, base+c.path, "", nil, nil); status != http.StatusNotFound || !bytes.Contains(raw, []byte("response_not_found")) {
			t.Errorf("%s %s: status %d, body %s", c.method, c.path, status, raw)
		}
	}
	status, id, backend, raw := respond(t, base, map[string]any{"model": simModel, "input": "hello", "max_output_tokens": 2}, false)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	for range 5 {
		status, hdr, raw := call(t, "GET", base+"/v1/responses/"+id, "", nil, nil)
		if status != http.StatusOK || hdr.Get(server.BackendHeader) != backend || !bytes.Contains(raw, []byte(id)) {
			t.Fatalf("GET stored response: status %d on %s (stored on %s): %s", status, hdr.Get(server.BackendHeader), backend, raw)
		}
	}
}

// TestResponsesStoreIsBounded: past responses.max_ids the oldest ids are
// forgotten (404), the newest still followed.
func TestResponsesStoreIsBounded(t *testing.T) {
	base := startRouter(t, 2, server.Config{ResponsesMaxIDs: 3})
	var ids []string
	for i := range 5 {
		_, id, _, _ := respond(t, base, map[string]any{"model": simModel, "input": fmt.Sprint("q", i), "max_output_tokens": 2}, false)
		ids = append(ids, id)
	}
	if status, _, _ := call(t, "GET", base+"/v1/responses/"+ids[0], "", nil, nil); status != http.StatusNotFound {
		t.Errorf("evicted id: status %d, want 404", status)
	}
	if status, _, raw := call(t, "GET", base+"/v1/responses/"+ids[4], "", nil, nil); status != http.StatusOK {
		t.Errorf("newest id: status %d: %s", status, raw)
	}
	_, _, raw := call(t, "GET", base+"/metrics", "", nil, nil)
	if !bytes.Contains(raw, []byte("prefixgate_responses_stored_ids 3")) {
		t.Errorf("metrics do not show 3 stored ids")
	}
}

// TestExplainFollowsStoredResponses: /v1/explain of a follow-up names the
// replica that stored its predecessor, and says an unknown id gets 404.
func TestExplainFollowsStoredResponses(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	_, id, backend, _ := respond(t, base, map[string]any{"model": simModel, "input": "hello", "max_output_tokens": 2}, false)
	for _, c := range []struct{ prev, backend, reason string }{{id, backend, "stored on"}, {"resp_unknown", "", "404"}} {
		body, _ := json.Marshal(map[string]any{"model": simModel, "input": "next", "previous_response_id": c.prev})
		status, _, raw := call(t, "POST", base+"/v1/explain?path=/v1/responses", "application/json", body, nil)
		var out struct{ Backend, Reason string }
		if status != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.Backend != c.backend || !strings.Contains(out.Reason, c.reason) {
			t.Errorf("explain with previous_response_id %s: status %d, %s; want backend %q", c.prev, status, raw, c.backend)
		}
	}
}

// TestStoredResponsesAreTheTenants: one tenant cannot follow up on, read
// or cancel another tenant's stored response.
func TestStoredResponsesAreTheTenants(t *testing.T) {
	const keyA, keyB = "tenant-a-key-0123456789", "tenant-b-key-0123456789"
	base := startRouter(t, 2, server.Config{Pipeline: pipeline.Config{
		Tenants: map[string]string{keyA: "a", keyB: "b"}, TenantSecret: []byte("a secret of sixteen bytes or more")}})
	as := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	body, _ := json.Marshal(map[string]any{"model": simModel, "input": "hello", "max_output_tokens": 2})
	status, _, raw := call(t, "POST", base+"/v1/responses", "application/json", body, as(keyA))
	var out struct{ ID string }
	if status != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.ID == "" {
		t.Fatalf("status %d: %s", status, raw)
	}
	if status, _, raw := call(t, "GET", base+"/v1/responses/"+out.ID, "", nil, as(keyA)); status != http.StatusOK {
		t.Errorf("its own tenant: status %d: %s", status, raw)
	}
	follow, _ := json.Marshal(map[string]any{"model": simModel, "input": "more", "previous_response_id": out.ID})
	for _, c := range []struct {
		method, path string
		body         []byte
	}{{"GET", "/v1/responses/" + out.ID, nil}, {"POST", "/v1/responses/" + out.ID + "/cancel", nil}, {"POST", "/v1/responses", follow}} {
		if status, _, raw := call(t, c.method, base+c.path, "application/json", c.body, as(keyB)); status != http.StatusNotFound {
			t.Errorf("another tenant, %s %s: status %d: %s", c.method, c.path, status, raw)
		}
	}
}

// TestResponsesChainsAgainstARandomBalancer measures what the id table is
// for: the same 20 chains of 10 follow-ups over 3 replicas, sent through
// the router and sent to a replica drawn at random (a balancer that does
// not know the ids). Through the router every follow-up is answered; at
// random about two in three find no predecessor.
func TestResponsesChainsAgainstARandomBalancer(t *testing.T) {
	urls, _ := countingFleet(t, 3)
	srv, err := server.New(server.Config{Backends: urls}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := serveFor(t, srv)
	rng := rand.New(rand.NewPCG(1, 2))
	run := func(pick func() string) (answered, failed int) {
		for c := range 20 {
			prev := ""
			for turn := range 11 {
				body := map[string]any{"model": simModel, "input": fmt.Sprintf("chain %d turn %d", c, turn), "max_output_tokens": 2}
				if prev != "" {
					body["previous_response_id"] = prev
				}
				status, id, _, _ := respond(t, pick(), body, false)
				if turn > 0 && status == http.StatusOK {
					answered++
				} else if turn > 0 {
					failed++
				}
				if status == http.StatusOK {
					prev = id
				}
			}
		}
		return answered, failed
	}
	ok, bad := run(func() string { return base })
	if bad != 0 || ok != 200 {
		t.Errorf("through the router: %d follow-ups answered, %d failed", ok, bad)
	}
	rok, rbad := run(func() string { return urls[rng.IntN(len(urls))] })
	t.Logf("follow-ups answered: through the router %d/200, to a random replica %d/200", ok, rok)
	if rbad < 100 {
		t.Errorf("a random balancer failed only %d of 200 follow-ups; the fleet does not keep responses per replica", rbad)
	}
}

// TestStoredResponseGetKeepsItsQuery: GET /v1/responses/{id} reaches the
// replica with its query string as the client sent it.
func TestStoredResponseGetKeepsItsQuery(t *testing.T) {
	var seen atomic.Value
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m"}]}`)
		case "/v1/responses":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"resp_q","object":"response","status":"completed"}`)
		case "/v1/responses/resp_q":
			seen.Store(r.URL.RawQuery)
			_, _ = io.WriteString(w, `{"id":"resp_q"}`)
		}
	}))
	t.Cleanup(hs.Close)
	srv, err := server.New(server.Config{Backends: []string{hs.URL}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := serveFor(t, srv)
	if status, _, raw := call(t, "POST", base+"/v1/responses", "application/json", []byte(`{"model":"m","input":"hi"}`), nil); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	if status, _, raw := call(t, "GET", base+"/v1/responses/resp_q?stream=true&starting_after=3", "", nil, nil); status != http.StatusOK {
		t.Fatalf("GET: status %d: %s", status, raw)
	}
	if q, _ := seen.Load().(string); q != "stream=true&starting_after=3" {
		t.Errorf("the replica saw the query %q", q)
	}
}
