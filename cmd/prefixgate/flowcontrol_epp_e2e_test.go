package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// flowAnswer is one request through the gateway: its answer and when the
// client had it.
type flowAnswer struct {
	name       string
	status     int
	retryAfter string
	body       string
	done       time.Time
	err        error
}

// chatFlow sends a non-streamed chat through the gateway with flow
// headers: fairness id and, if not empty, objective.
func chatFlow(gateway, name, fairness, objective string, maxTokens int) flowAnswer {
	body, _ := json.Marshal(map[string]any{"model": "vllmsim/tiny", "max_tokens": maxTokens, "messages": []map[string]string{
		{"role": "user", "content": "request " + name + " " + strings.Repeat("x", 64)}}})
	req, _ := http.NewRequest(http.MethodPost, "http://"+gateway+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-gateway-inference-fairness-id", fairness)
	if objective != "" {
		req.Header.Set("x-gateway-inference-objective", objective)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return flowAnswer{name: name, err: err, done: time.Now()}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return flowAnswer{name: name, status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(raw), done: time.Now(), err: err}
}

// TestEPPThroughEnvoyFlowControl: through real Envoy to `prefixgate epp`
// in front of one vllmsim replica that takes one request at a time
// (routing.threshold 1): while a long request runs, three requests of
// objective 0 queue (seen in prefixgate_flow_queued_requests), then one of
// a higher objective arrives; it is dispatched first, so it is answered
// before each of the three. A
// sheddable request (negative priority) sent while saturated is refused
// at the client with 429 and a Retry-After.
func TestEPPThroughEnvoyFlowControl(t *testing.T) {
	envoy := envoyBinary(t)
	_, addr := startReplica(t, "fc")
	cfg := filepath.Join(t.TempDir(), "epp.yaml")
	conf := "routing:\n  threshold: 1\nflow_control:\n  objectives:\n    interactive: 10\n    batch: -1\nbackends:\n  - http://" + addr + "\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	_, eppAddr, metricsAddr, _ := startEPP(t, "--config", cfg)
	gw, admin := freeAddr(t), freeAddr(t)
	path := writeBootstrap(t, gatewayConfig{admin: admin, gateway: gw, eppAddr: eppAddr, replicas: []string{addr}, bufferedRequests: true})
	startEnvoy(t, envoy, path, admin)
	if a := chatFlow(gw, "warm", "warm", "", 1); a.status != http.StatusOK {
		t.Fatalf("warm-up: %d %v %s", a.status, a.err, a.body)
	}

	var mu sync.Mutex
	var answers []flowAnswer
	var wg sync.WaitGroup
	send := func(name, fairness, objective string, maxTokens int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := chatFlow(gw, name, fairness, objective, maxTokens)
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		}()
	}
	queued := func(band, flow string, want float64) {
		series := fmt.Sprintf("prefixgate_flow_queued_requests{band=%q,flow=%q}", band, flow)
		waitFor(t, fmt.Sprintf("%s = %v", series, want), func() bool {
			v, ok := metricValue(t, metricsAddr, series)
			return ok && v == want
		})
	}
	// The long request holds the replica's one place for about 2 s (200
	// tokens at 10 ms); the others queue in the picker while it runs, each
	// sent once the one before is seen waiting.
	send("long", "bulk", "", 200)
	time.Sleep(100 * time.Millisecond)
	for i := range 3 {
		send(fmt.Sprintf("low%d", i), "bulk", "", 20)
		queued("0", "bulk", float64(i+1))
	}
	send("high", "vip", "interactive", 20)
	queued("10", "vip", 1)
	shed := chatFlow(gw, "sheddable", "cheap", "batch", 20)
	wg.Wait()

	if shed.err != nil || shed.status != http.StatusTooManyRequests || shed.retryAfter == "" {
		t.Errorf("sheddable request while saturated: status %d, Retry-After %q, %v: %s; want 429 with Retry-After",
			shed.status, shed.retryAfter, shed.err, shed.body)
	}
	done := map[string]time.Time{}
	for _, a := range answers {
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("%s: status %d, %v: %s", a.name, a.status, a.err, a.body)
		}
		done[a.name] = a.done
	}
	order := make([]string, 0, len(answers))
	for _, a := range answers {
		order = append(order, a.name)
	}
	t.Logf("answered in order %v; sheddable: %d Retry-After %s", order, shed.status, shed.retryAfter)
	for i := range 3 {
		low := fmt.Sprintf("low%d", i)
		if !done["high"].Before(done[low]) {
			t.Errorf("the interactive request, queued last, was answered after %s (order %v): want it dispatched first", low, order)
		}
	}
}
