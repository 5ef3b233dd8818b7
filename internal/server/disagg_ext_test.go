package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/route"
)

// startPD starts a prefill and a decode replica (prefill faults as given)
// and the router over them, and returns its base URL and the two
// replicas' names.
func startPD(t *testing.T, cfg server.Config, prefillFaults vllmsim.Faults) (base, prefill, decode string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	start := func(role string, f vllmsim.Faults) string {
		fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", 1, vllmsim.Config{Preset: "tiny", Speed: 50, Role: role, Faults: f, Name: role})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fleet.Close() })
		return fleet.URLs()[0]
	}
	p, d := start(vllmsim.RolePrefill, prefillFaults), start(vllmsim.RoleDecode, vllmsim.Faults{})
	cfg.Backends = []string{"prefill+" + p, "decode+" + d}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	return "http://" + ln.Addr().String(), strings.TrimPrefix(p, "http://"), strings.TrimPrefix(d, "http://")
}

// pdBody is a chat request whose system prompt fills many blocks.
func pdBody(tag string, stream bool) string {
	return fmt.Sprintf(`{"model":"vllmsim/tiny","max_tokens":3,"stream":%v,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":%q},{"role":"user","content":"go"}]}`,
		stream, tag+strings.Repeat(" a long context computed by the prefill worker", 40))
}

// routerMetrics sums the router's series of name whose labels contain
// every one of labels.
func routerMetrics(t *testing.T, base, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
next:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		sum += v
	}
	return sum
}

// TestSplitRequestCountsOnce: in each protocol a request is split (both
// workers named in the headers), the decode worker reports the prefix as
// cached, and the request counts once in the requests and token series,
// with one prefill and one decode leg beside.
func TestSplitRequestCountsOnce(t *testing.T) {
	for _, protocol := range []string{server.ProtocolVLLM, server.ProtocolSGLang} {
		t.Run(protocol, func(t *testing.T) {
			base, prefill, decode := startPD(t, server.Config{Disagg: server.DisaggConfig{Split: server.SplitAlways, Protocol: protocol, BootstrapPort: -1}}, vllmsim.Faults{})
			for i, stream := range []bool{false, true} {
				resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(pdBody(fmt.Sprint(protocol, i), stream)))
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Header.Get(server.BackendHeader) != decode || resp.Header.Get(server.PrefillBackendHeader) != prefill {
					t.Fatalf("status %d, decode %q, prefill %q: %s", resp.StatusCode, resp.Header.Get(server.BackendHeader), resp.Header.Get(server.PrefillBackendHeader), raw)
				}
				if !strings.Contains(string(raw), `"cached_tokens":`) || strings.Contains(string(raw), `"cached_tokens":0`) {
					t.Fatalf("the decode worker reported nothing cached: %s", raw)
				}
			}
			for name, want := range map[string]float64{
				"prefixgate_requests_total":        2,
				"prefixgate_disagg_requests_total": 2,
			} {
				if got := routerMetrics(t, base, name); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			for _, leg := range []string{"prefill", "decode"} {
				if got := routerMetrics(t, base, "prefixgate_disagg_legs_total", `leg="`+leg+`"`, `outcome="ok"`); got != 2 {
					t.Errorf("%s legs ok = %v, want 2", leg, got)
				}
			}
			// Tokens once: the decode worker's prompt, not the prefill's too.
			prompt, cached := routerMetrics(t, base, "prefixgate_prompt_tokens_total"), routerMetrics(t, base, "prefixgate_cached_prompt_tokens_total")
			if prompt == 0 || routerMetrics(t, base, "prefixgate_prompt_tokens_total", prefill) != 0 || cached == 0 {
				t.Errorf("prompt tokens %v (on the prefill worker %v), cached %v", prompt, routerMetrics(t, base, "prefixgate_prompt_tokens_total", prefill), cached)
			}
		})
	}
}

// TestFailedPrefillRunsAggregated: a prefill worker that answers 500 to
// every leg leaves the request to its decode worker, whole.
func TestFailedPrefillRunsAggregated(t *testing.T) {
	base, _, decode := startPD(t, server.Config{Disagg: server.DisaggConfig{Split: server.SplitAlways}}, vllmsim.Faults{ErrorRate: 1})
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(pdBody("fails", false)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(server.BackendHeader) != decode || resp.Header.Get(server.PrefillBackendHeader) != "" {
		t.Fatalf("status %d, decode %q, prefill %q: %s", resp.StatusCode, resp.Header.Get(server.BackendHeader), resp.Header.Get(server.PrefillBackendHeader), raw)
	}
	if got := routerMetrics(t, base, "prefixgate_disagg_requests_total", `mode="aggregated"`, `reason="prefill-failed"`); got != 1 {
		t.Errorf("aggregated after a failed prefill = %v, want 1", got)
	}
	if got := routerMetrics(t, base, "prefixgate_disagg_legs_total", `leg="prefill"`, `outcome="error"`); got != 1 {
		t.Errorf("failed prefill legs = %v, want 1", got)
	}
}

// TestExplainSaysWhetherItSplits: Explain names the prefill worker of a
// request it would split, and says why a short one runs aggregated.
func TestExplainSaysWhetherItSplits(t *testing.T) {
	base, prefill, _ := startPD(t, server.Config{Disagg: server.DisaggConfig{Split: server.SplitAlways}}, vllmsim.Faults{})
	explain := func(body string) (out struct {
		Split          string `json:"split"`
		PrefillBackend string `json:"prefill_backend"`
		Reason         string `json:"reason"`
	}) {
		resp, err := http.Post(base+"/v1/explain?path=/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if x := explain(pdBody("explain", false)); x.Split != "split" || x.PrefillBackend != prefill || !strings.Contains(x.Reason, "prefill on "+prefill) {
		t.Fatalf("explain = %+v", x)
	}
	costly, _, _ := startPD(t, server.Config{}, vllmsim.Faults{})
	base = costly
	x := explain(`{"model":"vllmsim/tiny","messages":[{"role":"user","content":"hi"}]}`)
	if x.Split != "aggregated" || x.PrefillBackend != "" || !strings.Contains(x.Reason, "few-uncached-tokens") {
		t.Fatalf("explain of a short prompt = %+v", x)
	}
}

// TestFailedPrefillRetriesOnAnother: a prefill leg whose worker answers
// 500 is sent to the other prefill worker, and the request is split there.
func TestFailedPrefillRetriesOnAnother(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var urls []string
	for i, f := range []vllmsim.Faults{{ErrorRate: 1}, {}, {}} {
		role := []string{vllmsim.RolePrefill, vllmsim.RolePrefill, vllmsim.RoleDecode}[i]
		fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", 1, vllmsim.Config{Preset: "tiny", Speed: 50, Role: role, Faults: f, Name: fmt.Sprint(role, i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fleet.Close() })
		urls = append(urls, fleet.URLs()[0])
	}
	bad, good := strings.TrimPrefix(urls[0], "http://"), strings.TrimPrefix(urls[1], "http://")
	srv, err := server.New(server.Config{Backends: []string{"prefill+" + urls[0], "prefill+" + urls[1], "decode+" + urls[2]},
		Disagg: server.DisaggConfig{Split: server.SplitAlways}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	// A prompt whose prefill the router would send to the failing worker.
	var body string
	for i := 0; body == "" && i < 64; i++ {
		b := pdBody(fmt.Sprint("retry", i), false)
		rec := httptestRecorder(h, "/v1/explain?path=/v1/chat/completions", b)
		var x struct {
			PrefillBackend string `json:"prefill_backend"`
		}
		if json.Unmarshal(rec, &x) == nil && x.PrefillBackend == bad {
			body = b
		}
	}
	if body == "" {
		t.Fatal("no prompt of 64 has its prefill on the first worker")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx, ln, time.Second)
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(server.PrefillBackendHeader) != good {
		t.Fatalf("status %d, prefill %q (want %s): %s", resp.StatusCode, resp.Header.Get(server.PrefillBackendHeader), good, raw)
	}
	base := "http://" + ln.Addr().String()
	if got := routerMetrics(t, base, "prefixgate_disagg_legs_total", `leg="prefill"`, bad, `outcome="error"`); got != 1 {
		t.Errorf("failed prefill legs on %s = %v, want 1", bad, got)
	}
}

// httptestRecorder runs one POST through h and returns the answer's body.
func httptestRecorder(h http.Handler, path, body string) []byte {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	return rec.Body.Bytes()
}

// TestSessionRequestsSplit: a session's later requests, pinned to its
// decode worker, are split too.
func TestSessionRequestsSplit(t *testing.T) {
	base, prefill, decode := startPD(t, server.Config{Disagg: server.DisaggConfig{Split: server.SplitAlways}}, vllmsim.Faults{})
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(pdBody(fmt.Sprint("session turn ", i), false)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.DefaultSessionHeader, "conversation-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get(server.BackendHeader) != decode || resp.Header.Get(server.PrefillBackendHeader) != prefill {
			t.Fatalf("turn %d: status %d, decode %q, prefill %q", i, resp.StatusCode, resp.Header.Get(server.BackendHeader), resp.Header.Get(server.PrefillBackendHeader))
		}
	}
}

// TestBothWorkerNeverSplitsOntoItself: a backend without a role in a
// fleet with roles takes prefill legs for the decode workers and whole
// requests, but never a prefill leg of its own decode.
func TestBothWorkerNeverSplitsOntoItself(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var urls []string
	for i, role := range []string{vllmsim.RoleDecode, vllmsim.RoleBoth} {
		fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", 1, vllmsim.Config{Preset: "tiny", Speed: 50, Role: role, Name: fmt.Sprint(role, i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fleet.Close() })
		urls = append(urls, fleet.URLs()[0])
	}
	decode, both := strings.TrimPrefix(urls[0], "http://"), strings.TrimPrefix(urls[1], "http://")
	srv, err := server.New(server.Config{Backends: []string{"decode+" + urls[0], urls[1]}, Disagg: server.DisaggConfig{Split: server.SplitAlways}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 64 && len(seen) < 2; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(pdBody(fmt.Sprint("both ", i), false)))
		req.Header.Set("Content-Type", "application/json")
		srv.Handler().ServeHTTP(rec, req)
		got, pre := rec.Header().Get(server.BackendHeader), rec.Header().Get(server.PrefillBackendHeader)
		switch {
		case rec.Code != 200:
			t.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
		case got == both && pre != "":
			t.Fatalf("request %d decoded on %s was prefilled on %q", i, both, pre)
		case got == decode && pre != both:
			t.Fatalf("request %d decoded on %s was prefilled on %q, want %s", i, decode, pre, both)
		}
		seen[got] = true
	}
	if len(seen) != 2 {
		t.Fatalf("64 requests all decoded on %v", seen)
	}
}

// TestHungPrefillRunsAggregated: a prefill worker that never answers
// holds a request no longer than disaggregation.prefill_timeout; the
// request then runs whole on its decode worker, in either protocol, and
// no leg stays in flight.
func TestHungPrefillRunsAggregated(t *testing.T) {
	for _, protocol := range []string{server.ProtocolVLLM, server.ProtocolSGLang} {
		t.Run(protocol, func(t *testing.T) {
			base, _, decode := startPD(t, server.Config{Disagg: server.DisaggConfig{Split: server.SplitAlways, Protocol: protocol,
				BootstrapPort: -1, PrefillTimeout: 300 * time.Millisecond}}, vllmsim.Faults{Hang: true})
			resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(pdBody("hung "+protocol, true)))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get(server.BackendHeader) != decode || resp.Header.Get(server.PrefillBackendHeader) != "" || !strings.Contains(string(raw), "[DONE]") {
				t.Fatalf("status %d, decode %q, prefill %q: %s", resp.StatusCode, resp.Header.Get(server.BackendHeader), resp.Header.Get(server.PrefillBackendHeader), raw)
			}
			if got := routerMetrics(t, base, "prefixgate_disagg_requests_total", `reason="prefill-failed"`); got != 1 {
				t.Errorf("aggregated after a hung prefill = %v, want 1", got)
			}
			if got := routerMetrics(t, base, "prefixgate_backend_in_flight") + routerMetrics(t, base, "prefixgate_disagg_prefill_in_flight"); got != 0 {
				t.Errorf("%v legs still in flight", got)
			}
		})
	}
}

// TestSplitRequestsGoThroughFlowControl: a request that may be split picks
// its decode worker through flow control: with the decode worker's one
// place taken by an open stream, a sheddable request is refused by flow
// control at once (429, flow_control_sheddable, Retry-After), and a
// request of priority 0 waits in flow control's queue until the stream
// ends, then is split and answered.
func TestSplitRequestsGoThroughFlowControl(t *testing.T) {
	base, _, decode := startPD(t, server.Config{
		Route:       route.Config{DefaultThreshold: 1},
		Disagg:      server.DisaggConfig{Split: server.SplitAlways, Protocol: server.ProtocolVLLM, BootstrapPort: -1},
		FlowControl: flowgate.Config{Objectives: map[string]string{"batch": "-1"}},
	}, vllmsim.Faults{})
	long := strings.Replace(pdBody("long", true), `"max_tokens":3`, `"max_tokens":400`, 1)
	held, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(long))
	if err != nil {
		t.Fatal(err)
	}
	if held.StatusCode != 200 || held.Header.Get(server.BackendHeader) != decode {
		t.Fatalf("the long request: %d on %q", held.StatusCode, held.Header.Get(server.BackendHeader))
	}
	post := func(body string, hdr map[string]string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp, raw
	}
	resp, raw := post(pdBody("bulk", false), map[string]string{flowgate.ObjectiveHeader: "batch"})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(raw), "flow_control_sheddable") {
		t.Errorf("sheddable beside the held stream: %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	waited := make(chan *http.Response, 1)
	go func() {
		r, _ := post(pdBody("standard", false), nil)
		waited <- r
	}()
	for i := 0; routerMetrics(t, base, "prefixgate_flow_queued_requests") < 1; i++ {
		if i == 2000 {
			t.Fatal("the request of priority 0 never waited in flow control's queue")
		}
		time.Sleep(2 * time.Millisecond)
	}
	_, _ = io.Copy(io.Discard, held.Body)
	held.Body.Close()
	r := <-waited
	if r.StatusCode != 200 || r.Header.Get(flowgate.FlowHeader) == "" || r.Header.Get(server.PrefillBackendHeader) == "" {
		t.Errorf("after the stream: %d, %s %q, prefill %q", r.StatusCode, flowgate.FlowHeader, r.Header.Get(flowgate.FlowHeader), r.Header.Get(server.PrefillBackendHeader))
	}
}
