package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// viaGateway is one answer through the gateway: status, the replica that
// answered (vllmsim's X-Vllmsim-Replica) and the body.
type viaGateway struct {
	status  int
	replica string
	body    []byte
}

func sendVia(t *testing.T, method, url string, body any) viaGateway {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer of %s %s: %v", method, url, err)
	}
	return viaGateway{status: resp.StatusCode, replica: resp.Header.Get("X-Vllmsim-Replica"), body: raw}
}

// sseEvents are the JSON data of an event stream's events.
func sseEvents(body []byte) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev map[string]any
			if json.Unmarshal([]byte(data), &ev) == nil {
				out = append(out, ev)
			}
		}
	}
	return out
}

// storedID is a Responses answer's id, plain or streamed (its
// response.created event), and the cached prompt tokens it reports.
func storedID(t *testing.T, a viaGateway, stream bool) (id string, cached float64) {
	t.Helper()
	resp := map[string]any{}
	if !stream {
		if err := json.Unmarshal(a.body, &resp); err != nil {
			t.Fatalf("Responses answer %q: %v", a.body, err)
		}
	} else {
		for _, ev := range sseEvents(a.body) {
			switch ev["type"] {
			case "response.created":
				r, _ := ev["response"].(map[string]any)
				id, _ = r["id"].(string)
			case "response.completed":
				resp, _ = ev["response"].(map[string]any)
			}
		}
	}
	if !stream {
		id, _ = resp["id"].(string)
	}
	if id == "" {
		t.Fatalf("Responses answer without an id: %.400s", a.body)
	}
	usage, _ := resp["usage"].(map[string]any)
	details, _ := usage["input_tokens_details"].(map[string]any)
	cached, _ = details["cached_tokens"].(float64)
	return id, cached
}

// TestEPPThroughEnvoyResponsesAndMessages runs the Responses and Messages
// APIs through the doc's Envoy and the picker over three vllmsim replicas:
// requests sharing a long prefix land on one replica, and chains of
// Responses follow-ups by previous_response_id each reach the replica that
// stored their predecessor (its store alone holds it), plain and streamed.
func TestEPPThroughEnvoyResponsesAndMessages(t *testing.T) {
	envoy := envoyBinary(t)
	var args []string
	for i := range 3 {
		_, addr := startReplica(t, "r"+strconv.Itoa(i))
		args = append(args, "--backend", "http://"+addr)
	}
	_, eppAddr, metricsAddr, _ := startEPP(t, args...)
	gw, admin := freeAddr(t), freeAddr(t)
	startEnvoy(t, envoy, writeBootstrap(t, gatewayConfig{admin: admin, gateway: gw, eppAddr: eppAddr}), admin)
	base := "http://" + gw
	system := strings.Repeat("You are the archivist of a maritime museum; answer with dates and sources. ", 30)

	t.Run("Responses sharing a long prefix land on one replica", func(t *testing.T) {
		home := ""
		for i := range 6 {
			stream := i%2 == 1
			a := sendVia(t, "POST", base+"/v1/responses", map[string]any{"model": "vllmsim/tiny", "max_output_tokens": 2,
				"instructions": system, "input": "question " + strconv.Itoa(i), "stream": stream})
			if a.status != http.StatusOK {
				t.Fatalf("request %d: %d %s", i, a.status, a.body)
			}
			_, cached := storedID(t, a, stream)
			if i == 0 {
				home = a.replica
			} else if a.replica != home || cached <= 0 {
				t.Fatalf("request %d on %s with %v cached tokens; the first went to %s", i, a.replica, cached, home)
			}
		}
	})

	t.Run("Messages sharing a long prefix land on one replica", func(t *testing.T) {
		home := ""
		for i := range 6 {
			stream := i%2 == 1
			a := sendVia(t, "POST", base+"/v1/messages", map[string]any{"model": "vllmsim/tiny", "max_tokens": 2, "system": system,
				"messages": []any{map[string]any{"role": "user", "content": "question " + strconv.Itoa(i)}}, "stream": stream})
			if a.status != http.StatusOK {
				t.Fatalf("request %d: %d %s", i, a.status, a.body)
			}
			if stream && !bytes.Contains(a.body, []byte("event: message_stop")) {
				t.Fatalf("streamed Messages answer without message_stop: %.400s", a.body)
			}
			if i == 0 {
				home = a.replica
				continue
			}
			if a.replica != home {
				t.Fatalf("request %d went to %s, the first to %s", i, a.replica, home)
			}
			if !stream && !bytes.Contains(a.body, []byte(`"cache_read_input_tokens":`)) || bytes.Contains(a.body, []byte(`"cache_read_input_tokens":0`)) {
				t.Fatalf("request %d on %s read nothing from the prefix cache: %.400s", i, a.replica, a.body)
			}
		}
	})

	t.Run("previous_response_id chains stay on the replica that stored each response", func(t *testing.T) {
		const conversations, followUps = 20, 10
		replicas := map[string]bool{}
		for c := range conversations {
			stream := c%2 == 1
			// Inputs that share no prefix: only the id keeps a chain on
			// its replica.
			input := func(turn int) string {
				return fmt.Sprintf("%d-%d: %s", c, turn, strings.Repeat("tell me more about ship number "+strconv.Itoa(c*100+turn)+". ", 8))
			}
			first := sendVia(t, "POST", base+"/v1/responses", map[string]any{"model": "vllmsim/tiny", "max_output_tokens": 2, "input": input(0), "stream": stream})
			if first.status != http.StatusOK {
				t.Fatalf("conversation %d: %d %s", c, first.status, first.body)
			}
			prev, _ := storedID(t, first, stream)
			at := first.replica
			replicas[at] = true
			for turn := 1; turn <= followUps; turn++ {
				a := sendVia(t, "POST", base+"/v1/responses", map[string]any{"model": "vllmsim/tiny", "max_output_tokens": 2,
					"input": input(turn), "previous_response_id": prev, "stream": stream})
				if a.status != http.StatusOK || a.replica != at {
					t.Fatalf("conversation %d turn %d naming %s (stored on %s): %d on %q: %.400s", c, turn, prev, at, a.status, a.replica, a.body)
				}
				prev, _ = storedID(t, a, stream)
			}
			got := sendVia(t, "GET", base+"/v1/responses/"+prev, nil)
			if got.status != http.StatusOK || got.replica != at || !bytes.Contains(got.body, []byte(prev)) {
				t.Fatalf("GET /v1/responses/%s (stored on %s): %d on %q: %.400s", prev, at, got.status, got.replica, got.body)
			}
		}
		if len(replicas) < 2 {
			t.Fatalf("%d conversations all started on %v: the test needs them spread", conversations, replicas)
		}
		if v, ok := metricValue(t, metricsAddr, "prefixgate_responses_stored_ids"); !ok || v < conversations*(followUps+1) {
			t.Fatalf("prefixgate_responses_stored_ids = %v (%v), want at least %d", v, ok, conversations*(followUps+1))
		}
	})

	t.Run("an unknown id is the picker's 404 in OpenAI's shape", func(t *testing.T) {
		for _, r := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/v1/responses", map[string]any{"model": "vllmsim/tiny", "input": "hi", "previous_response_id": "resp_unknown"}},
			{"GET", "/v1/responses/resp_unknown", nil},
			{"POST", "/v1/responses/resp_unknown/cancel", nil},
		} {
			a := sendVia(t, r.method, base+r.path, r.body)
			var e struct {
				Error struct{ Code, Message string }
			}
			if a.status != http.StatusNotFound || a.replica != "" || json.Unmarshal(a.body, &e) != nil || e.Error.Code != "response_not_found" {
				t.Fatalf("%s %s: %d from %q: %s", r.method, r.path, a.status, a.replica, a.body)
			}
		}
	})
}
