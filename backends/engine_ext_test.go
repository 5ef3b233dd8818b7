package backends_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prefixgate/prefixgate/backends"
)

// fixture reads a hand-written engine answer from testdata/engines (see
// its README for the engine source each shape follows).
func fixture(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "engines", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// fakeEngine is a real HTTP server that answers like one engine: its
// /metrics bodies in turn (the last repeats), /props, /get_server_info,
// /health and /v1/models.
type fakeEngine struct {
	metrics       []string
	metricsStatus int    // when not 200: /metrics answers this with metricsBody
	metricsBody   string //
	props         string // llama.cpp; "" answers 404
	serverInfo    string // SGLang; "" answers 404
	serverInfoNew string // SGLang's newer /server_info; "" answers 404
	health        int    // 0 is 200
	model         string

	scrapes atomic.Int64
}

func (f *fakeEngine) start(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		n := int(f.scrapes.Add(1)) - 1
		switch {
		case f.metricsStatus != 0 && f.metricsStatus != http.StatusOK:
			w.WriteHeader(f.metricsStatus)
			w.Write([]byte(f.metricsBody))
		case len(f.metrics) == 0:
			http.NotFound(w, r)
		default:
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			w.Write([]byte(f.metrics[min(n, len(f.metrics)-1)]))
		}
	})
	jsonOr404 := func(body *string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if *body == "" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(*body))
		}
	}
	mux.HandleFunc("GET /props", jsonOr404(&f.props))
	mux.HandleFunc("GET /get_server_info", jsonOr404(&f.serverInfo))
	mux.HandleFunc("GET /server_info", jsonOr404(&f.serverInfoNew))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if f.health != 0 {
			w.WriteHeader(f.health)
			w.Write([]byte(`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`))
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"object":"list","data":[{"id":"` + f.model + `","object":"model"}]}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestEngineDetection runs the pool's probes and scrapes against servers
// that answer like vLLM, SGLang and llama.cpp (with and without their
// metrics switched on), a plain OpenAI server, and backends whose engine
// the spec names.
func TestEngineDetection(t *testing.T) {
	sglInfo := fixture(t, "sglang_server_info.json")
	props := fixture(t, "llamacpp_props.json")
	for _, tc := range []struct {
		name   string
		prefix string // ENGINE+ before the URL
		eng    *fakeEngine

		engine      backends.Engine
		known       bool
		running     float64
		waiting     float64
		kv          float64
		hitRate     float64 // after two scrapes
		cacheTokens int
		healthy     bool
	}{
		{name: "vllm", eng: &fakeEngine{metrics: []string{fixture(t, "vllm.metrics")}},
			engine: backends.EngineVLLM, known: true, running: 2, waiting: 1, kv: 0.125, hitRate: -1, cacheTokens: 2048 * 16, healthy: true},
		{name: "sglang with --enable-metrics", eng: &fakeEngine{metrics: []string{fixture(t, "sglang.metrics")}, serverInfo: sglInfo},
			engine: backends.EngineSGLang, known: true, running: 3, waiting: 4, kv: 0.04, hitRate: 0.75, cacheTokens: 1048576, healthy: true},
		{name: "sglang without metrics", eng: &fakeEngine{serverInfo: sglInfo},
			engine: backends.EngineSGLang, hitRate: -1, cacheTokens: 1048576, healthy: true},
		{name: "configured sglang with only /server_info", prefix: "sglang+", eng: &fakeEngine{metrics: []string{fixture(t, "sglang.metrics")}, serverInfoNew: sglInfo},
			engine: backends.EngineSGLang, known: true, running: 3, waiting: 4, kv: 0.04, hitRate: 0.75, cacheTokens: 1048576, healthy: true},
		{name: "sglang with two data-parallel ranks", eng: &fakeEngine{serverInfo: strings.Replace(sglInfo, `"dp_size":1,`, `"dp_size":2,`, 1)},
			engine: backends.EngineSGLang, hitRate: -1, cacheTokens: 2 * 1048576, healthy: true},
		{name: "llamacpp with --metrics", eng: &fakeEngine{metrics: []string{fixture(t, "llamacpp_1.metrics"), fixture(t, "llamacpp_2.metrics")}, props: props},
			// (1600-700) cached of (400+1600)-(300+700) looked up
			engine: backends.EngineLlamaCpp, known: true, running: 1, waiting: 0, hitRate: 0.9, cacheTokens: 4096 * 4, healthy: true},
		{name: "llamacpp without --metrics, loading", eng: &fakeEngine{metricsStatus: http.StatusNotImplemented, metricsBody: fixture(t, "llamacpp_no_metrics.json"), props: props, health: http.StatusServiceUnavailable},
			engine: backends.EngineLlamaCpp, hitRate: -1, cacheTokens: 4096 * 4, healthy: false},
		{name: "plain openai server", eng: &fakeEngine{},
			engine: backends.EngineAuto, hitRate: -1, healthy: true},
		{name: "configured sglang reads only sglang names", prefix: "sglang+", eng: &fakeEngine{metrics: []string{fixture(t, "vllm.metrics")}},
			engine: backends.EngineSGLang, hitRate: -1, healthy: true},
		{name: "configured llamacpp", prefix: "LlamaCpp+", eng: &fakeEngine{props: props},
			engine: backends.EngineLlamaCpp, hitRate: -1, cacheTokens: 4096 * 4, healthy: true},
		{name: "configured vllm asks no info endpoint", prefix: "vllm+", eng: &fakeEngine{props: props, serverInfo: sglInfo},
			engine: backends.EngineVLLM, hitRate: -1, healthy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.eng.model = "org/" + tc.name
			srv := tc.eng.start(t)
			var mu sync.Mutex
			var members [][]int
			p, err := backends.NewPool([]string{tc.prefix + srv.URL}, backends.Options{
				FailThreshold: 1,
				OnMembership: func(bs []*backends.Backend) {
					mu.Lock()
					defer mu.Unlock()
					members = append(members, []int{bs[0].CacheTokens()})
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			b := p.Backends()[0]
			ctx := context.Background()
			p.ProbeAll(ctx) // may report a model list: not what is counted here
			mu.Lock()
			members = nil
			mu.Unlock()
			p.ScrapeAll(ctx)
			p.ScrapeAll(ctx)
			l := b.Load()
			if b.Engine() != tc.engine || l.Known != tc.known || l.Running != tc.running || l.Waiting != tc.waiting ||
				l.KVCacheUsage != tc.kv || l.PrefixHitRate != tc.hitRate || b.CacheTokens() != tc.cacheTokens {
				t.Fatalf("engine %v load %+v capacity %d\nwant engine %v known %v running %v waiting %v kv %v hit rate %v capacity %d",
					b.Engine(), l, b.CacheTokens(), tc.engine, tc.known, tc.running, tc.waiting, tc.kv, tc.hitRate, tc.cacheTokens)
			}
			if tc.known && l.Engine != tc.engine {
				t.Fatalf("load engine %v, want %v", l.Engine, tc.engine)
			}
			if !tc.known && l.Err == nil && tc.eng.metrics == nil {
				t.Fatalf("a backend without usable /metrics scraped with no error: %+v", l)
			}
			if b.Healthy() != tc.healthy {
				t.Fatalf("healthy %v, want %v", b.Healthy(), tc.healthy)
			}
			if tc.healthy && (len(b.Models()) != 1 || b.Models()[0] != tc.eng.model) {
				t.Fatalf("models %v, want [%s]", b.Models(), tc.eng.model)
			}
			mu.Lock()
			defer mu.Unlock()
			// A capacity learned by a scrape reaches OnMembership (and so
			// route.Member.CacheTokens) once; an unchanged one does not
			// call it again.
			wantCalls := 0
			if tc.cacheTokens > 0 {
				wantCalls = 1
			}
			if len(members) != wantCalls || (wantCalls == 1 && members[0][0] != tc.cacheTokens) {
				t.Fatalf("OnMembership saw capacities %v, want one call with %d", members, tc.cacheTokens)
			}
		})
	}
}

func TestSplitEngine(t *testing.T) {
	for _, tc := range []struct {
		spec, rest string
		engine     backends.Engine
		err        bool
	}{
		{spec: "http://10.0.0.5:8000", rest: "http://10.0.0.5:8000"},
		{spec: " 10.0.0.5:8000 ", rest: "10.0.0.5:8000"},
		{spec: "sglang+http://10.0.0.5:30000", rest: "http://10.0.0.5:30000", engine: backends.EngineSGLang},
		{spec: "llamacpp+dns://llama.svc:8080", rest: "dns://llama.svc:8080", engine: backends.EngineLlamaCpp},
		{spec: "VLLM+10.0.0.5:8000", rest: "10.0.0.5:8000", engine: backends.EngineVLLM},
		{spec: "auto+file:///etc/fleet", rest: "file:///etc/fleet"},
		{spec: "http://h:1/a+b", rest: "http://h:1/a+b"},
		{spec: "tgi+http://h:1", err: true},
		{spec: "+http://h:1", err: true},
		{spec: "sglang+", err: true},
	} {
		e, rest, err := backends.SplitEngine(tc.spec)
		if (err != nil) != tc.err || (!tc.err && (e != tc.engine || rest != tc.rest)) {
			t.Errorf("SplitEngine(%q) = %v, %q, %v; want %v, %q, error %v", tc.spec, e, rest, err, tc.engine, tc.rest, tc.err)
		}
	}
	if _, err := backends.NewPool([]string{"tgi+http://127.0.0.1:1"}, backends.Options{}); err == nil {
		t.Fatal("NewPool took an unknown engine")
	}
}

// TestEngineChangeReplacesBackend: naming another engine for the same
// address on reload gives a fresh backend (its detection and capacity
// belong to the old engine).
func TestEngineChangeReplacesBackend(t *testing.T) {
	p, err := backends.NewPool([]string{"http://127.0.0.1:9"}, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := p.Backends()[0]
	if err := p.SetBackends([]string{"sglang+http://127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	after := p.Backends()[0]
	if after == before || after.Name != before.Name || after.Engine() != backends.EngineSGLang {
		t.Fatalf("before %p %v, after %p %v %v", before, before.Name, after, after.Name, after.Engine())
	}
}
