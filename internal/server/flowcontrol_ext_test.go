package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/route"
)

func chatBody(model, text string, maxTokens int) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "max_tokens": maxTokens,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	return b
}

// metricSum sums the samples of a metric whose labels contain want.
func metricSum(t *testing.T, base, name, want string) float64 {
	t.Helper()
	_, _, body := call(t, http.MethodGet, base+"/metrics", "", nil, nil)
	re := regexp.MustCompile(`(?m)^` + name + `\{([^}]*)\} (\S+)$`)
	sum := 0.0
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		if strings.Contains(m[1], want) {
			v, _ := strconv.ParseFloat(m[2], 64)
			sum += v
		}
	}
	return sum
}

// A tenant floods two replicas that run two requests each: its excess
// waits in prefixgate, a request of a higher objective goes ahead of it, a
// sheddable one is refused at once with 429 and Retry-After, an unknown
// objective is a 400, and every flood request is answered.
func TestFlowControlPriorityOverFlood(t *testing.T) {
	h := startHarness(t, 2, server.Config{
		Route:       route.Config{Policy: "least-outstanding", DefaultThreshold: 2},
		FlowControl: flowgate.Config{Objectives: map[string]string{"interactive": "10", "batch": "-1"}},
	}, vllmsim.Config{Preset: "tiny", Engine: vllmsim.EngineConfig{MaxNumSeqs: 2}})
	url := h.base + "/v1/chat/completions"
	const flood = 12
	var floodDone atomic.Int32
	var wg sync.WaitGroup
	statuses := make(chan int, flood)
	for i := range flood {
		wg.Go(func() {
			st, _, _ := call(t, http.MethodPost, url, "application/json", chatBody("vllmsim/tiny", fmt.Sprintf("flood %d %s", i, strings.Repeat("long prompt ", 100)), 20),
				map[string]string{flowgate.FairnessHeader: "flood"})
			floodDone.Add(1)
			statuses <- st
		})
	}
	for i := 0; metricSum(t, h.base, "prefixgate_flow_queued_requests", `flow="flood"`) < flood-4; i++ {
		if i == 2000 {
			t.Fatal("the flood never queued in prefixgate")
		}
		time.Sleep(2 * time.Millisecond)
	}
	st, _, msg := call(t, http.MethodPost, url, "application/json", chatBody("vllmsim/tiny", "bulk", 4),
		map[string]string{flowgate.ObjectiveHeader: "batch"})
	if st != http.StatusTooManyRequests || !strings.Contains(string(msg), "sheddable") {
		t.Errorf("sheddable while saturated: %d %s", st, msg)
	}
	_, _, ex := call(t, http.MethodPost, h.base+"/v1/explain", "application/json", chatBody("vllmsim/tiny", "hello", 4),
		map[string]string{flowgate.FairnessHeader: "flood"})
	var explained struct {
		Flow struct {
			FairnessID string `json:"fairness_id"`
			Saturated  bool   `json:"saturated"`
			Ahead      int    `json:"ahead"`
		} `json:"flow"`
	}
	if err := json.Unmarshal(ex, &explained); err != nil || explained.Flow.FairnessID != "flood" || !explained.Flow.Saturated || explained.Flow.Ahead == 0 {
		t.Errorf("explain while saturated: %s", ex)
	}
	st, _, msg = call(t, http.MethodPost, url, "application/json", chatBody("vllmsim/tiny", "x", 4),
		map[string]string{flowgate.ObjectiveHeader: "urgent"})
	if st != http.StatusBadRequest || !strings.Contains(string(msg), `unknown objective \"urgent\"`) {
		t.Errorf("unknown objective: %d %s", st, msg)
	}
	st, hdr, _ := call(t, http.MethodPost, url, "application/json", chatBody("vllmsim/tiny", "hello", 4),
		map[string]string{flowgate.FairnessHeader: "flood", flowgate.GatewayObjectiveHeader: "interactive"})
	ahead := floodDone.Load()
	if st != http.StatusOK || !strings.Contains(hdr.Get(flowgate.FlowHeader), `fairness_id="flood"; priority=10`) {
		t.Errorf("interactive: %d, %s %q", st, flowgate.FlowHeader, hdr.Get(flowgate.FlowHeader))
	}
	// First come first served, it would have waited for all eight queued
	// flood requests to start, so for at least eight to finish.
	if ahead > 6 {
		t.Errorf("%d flood requests finished before the interactive one; it should have gone ahead of those queued", ahead)
	}
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != http.StatusOK {
			t.Errorf("flood request answered %d", st)
		}
	}
	if got := metricSum(t, h.base, "prefixgate_flow_dispatched_total", `band="0",flow="flood"`); got != flood {
		t.Errorf("flood dispatched %v; want %d", got, flood)
	}
	if got := metricSum(t, h.base, "prefixgate_flow_shed_total", `reason="sheddable"`); got != 1 {
		t.Errorf("shed %v; want 1", got)
	}
}

// With engine_priority on, a request's priority reaches a vLLM backend in
// vLLM's own field and sense (lower first), after any of the client's own;
// priority 0 leaves the body alone.
func TestEnginePriorityField(t *testing.T) {
	bodies := make(chan string, 4)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			b, _ := io.ReadAll(r.Body)
			bodies <- string(b)
		}
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
	}))
	defer backend.Close()
	srv, err := server.New(server.Config{Backends: []string{"vllm+" + backend.URL},
		FlowControl: flowgate.Config{EnginePriority: true, Objectives: map[string]string{"interactive": "10"}}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	router := httptest.NewServer(srv.Handler())
	defer router.Close()
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"priority":-99}`
	st, _, _ := call(t, http.MethodPost, router.URL+"/v1/chat/completions", "application/json", []byte(body),
		map[string]string{flowgate.ObjectiveHeader: "interactive"})
	if got := <-bodies; st != 200 || !strings.HasSuffix(got, `,"priority":-10}`) {
		t.Errorf("interactive: %d, backend got %s", st, got)
	}
	st, _, _ = call(t, http.MethodPost, router.URL+"/v1/chat/completions", "application/json", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), nil)
	if got := <-bodies; st != 200 || strings.Contains(got, "priority") {
		t.Errorf("priority 0: %d, backend got %s", st, got)
	}
	// Each answer's usage.completion_tokens (1) is charged to its flow.
	if got := metricSum(t, router.URL, "prefixgate_flow_served_tokens_total", `flow="default",kind="output"`); got != 2 {
		t.Errorf("output tokens served %v; want 2", got)
	}
}

// A streamed answer is charged its usage's completion_tokens when an event
// states them, else one token per event that carries text (how vLLM and
// SGLang stream): a client that leaves include_usage off is not served
// for free.
func TestStreamOutputCharged(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, tok := range []string{"a", "b", "", "c"} {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", tok)
		}
		if strings.Contains(string(b), "include_usage") {
			io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":7}}\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer backend.Close()
	srv, err := server.New(server.Config{Backends: []string{"vllm+" + backend.URL}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	router := httptest.NewServer(srv.Handler())
	defer router.Close()
	for _, c := range []struct {
		tenant, extra string
		want          float64
	}{
		{"counted", "", 3}, // three events with text
		{"stated", `,"stream_options":{"include_usage":true}`, 7}, // the usage wins
	} {
		body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]` + c.extra + `}`
		st, _, raw := call(t, http.MethodPost, router.URL+"/v1/chat/completions", "application/json", []byte(body),
			map[string]string{flowgate.FairnessHeader: c.tenant})
		if st != 200 {
			t.Fatalf("%s: %d %s", c.tenant, st, raw)
		}
		if got := metricSum(t, router.URL, "prefixgate_flow_served_tokens_total", `flow="`+c.tenant+`",kind="output"`); got != c.want {
			t.Errorf("%s: output tokens served %v; want %v", c.tenant, got, c.want)
		}
	}
}
