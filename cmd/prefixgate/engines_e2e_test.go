package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// routerTokenCounters sums prefixgate_prompt_tokens_total and
// prefixgate_cached_prompt_tokens_total over backends from the router's
// /metrics.
func routerTokenCounters(t *testing.T, base string) (prompt, cached float64) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		into := &prompt
		switch {
		case strings.HasPrefix(line, "prefixgate_prompt_tokens_total{"):
		case strings.HasPrefix(line, "prefixgate_cached_prompt_tokens_total{"):
			into = &cached
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		*into += v
	}
	return prompt, cached
}

// TestServeCountsCachedTokens runs `prefixgate serve` in front of two
// simulated vLLM replicas, one named with the ENGINE+URL flag syntax, and
// checks that the router's token counters move by exactly what the
// replicas reported in the answers the client received, unary and
// streamed.
func TestServeCountsCachedTokens(t *testing.T) {
	fleet := startFleet(t, 2)
	urls := fleet.URLs()
	_, base, logs := startServe(t, "--backend", "vllm+"+urls[0], "--backend", urls[1])
	if p, c := routerTokenCounters(t, base); p != 0 || c != 0 {
		t.Fatalf("counters before any request: %v %v", p, c)
	}
	doc := strings.Repeat("The quarterly report covers revenue, costs and outlook in detail. ", 40)
	var wantPrompt, wantCached int64
	for i := range 12 {
		stream := i%2 == 1
		body := fmt.Sprintf(`{"model":"vllmsim/tiny","messages":[{"role":"system","content":%q},{"role":"user","content":"question %d"}],"max_tokens":2`, doc, i/3)
		if stream {
			body += `,"stream":true,"stream_options":{"include_usage":true}`
		}
		body += "}"
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d err %v %.300s\n%s", resp.StatusCode, err, raw, logs.String())
		}
		usage := gjson.GetBytes(raw, "usage")
		if stream {
			for _, line := range bytes.Split(raw, []byte("\n")) {
				if u := gjson.GetBytes(bytes.TrimPrefix(line, []byte("data: ")), "usage"); u.IsObject() {
					usage = u
				}
			}
		}
		cached := usage.Get("prompt_tokens_details.cached_tokens")
		if !usage.Get("prompt_tokens").Exists() || !cached.Exists() {
			t.Fatalf("answer %d reports no usage: %.300s", i, raw)
		}
		wantPrompt += usage.Get("prompt_tokens").Int()
		wantCached += cached.Int()
	}
	if wantCached == 0 || wantCached >= wantPrompt {
		t.Fatalf("replicas reported %d cached of %d prompt tokens; the repeated document should hit", wantCached, wantPrompt)
	}
	// The counters move as each handler returns, just after the client
	// has its body: poll, bounded.
	var p, c float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if p, c = routerTokenCounters(t, base); p == float64(wantPrompt) && c == float64(wantCached) {
			t.Logf("router counted %v prompt and %v cached tokens over 12 answers", p, c)
			return
		}
	}
	t.Fatalf("router counted %v prompt and %v cached tokens; the replicas reported %d and %d", p, c, wantPrompt, wantCached)
}
