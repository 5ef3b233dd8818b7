package backends_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/backends"
)

func TestSplitSpec(t *testing.T) {
	for _, tc := range []struct {
		spec, rest string
		role       backends.Role
		engine     backends.Engine
		err        string
	}{
		{spec: "http://10.0.0.5:8000", rest: "http://10.0.0.5:8000"},
		{spec: "prefill+http://10.0.0.5:8000", rest: "http://10.0.0.5:8000", role: backends.RolePrefill},
		{spec: "decode+vllm+http://10.0.0.6:8000", rest: "http://10.0.0.6:8000", role: backends.RoleDecode, engine: backends.EngineVLLM},
		{spec: "Prefill+SGLang+dns://sgl.svc:30000", rest: "dns://sgl.svc:30000", role: backends.RolePrefill, engine: backends.EngineSGLang},
		{spec: "both+10.0.0.5:8000", rest: "10.0.0.5:8000"},
		{spec: "sglang+http://h:1", rest: "http://h:1", engine: backends.EngineSGLang},
		{spec: "decode+http://h:1/a+b", rest: "http://h:1/a+b", role: backends.RoleDecode},
		{spec: "vllm+prefill+http://h:1", err: "after the engine"},
		{spec: "prefill+decode+http://h:1", err: "role given twice"},
		{spec: "vllm+sglang+http://h:1", err: "engine given twice"},
		{spec: "prefil+http://h:1", err: `prefix "prefil" is neither`},
		{spec: "prefill+vllm+x+http://h:1", err: "at most ROLE+ENGINE+"},
		{spec: "prefill++http://h:1", err: "empty prefix"},
		{spec: "prefill+", err: "expected [ROLE+][ENGINE+]URL"},
	} {
		r, e, rest, err := backends.SplitSpec(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.spec) {
				t.Errorf("SplitSpec(%q) error %v, want one naming the spec and %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || r != tc.role || e != tc.engine || rest != tc.rest {
			t.Errorf("SplitSpec(%q) = %v, %v, %q, %v; want %v, %v, %q", tc.spec, r, e, rest, err, tc.role, tc.engine, tc.rest)
		}
	}
}

// TestPoolRoles: each backend has its spec's role, a fleet without one has
// none, and naming another role for an address on reload replaces its
// backend.
func TestPoolRoles(t *testing.T) {
	p, err := backends.NewPool([]string{"prefill+vllm+http://127.0.0.1:9", "decode+http://127.0.0.1:10", "127.0.0.1:11"}, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs := p.Backends()
	want := []backends.Role{backends.RolePrefill, backends.RoleDecode, backends.RoleBoth}
	for i, b := range bs {
		if b.Role() != want[i] {
			t.Errorf("%s role %v, want %v", b.Name, b.Role(), want[i])
		}
	}
	if bs[0].Engine() != backends.EngineVLLM || !backends.HasRoles(bs) {
		t.Fatalf("engine %v, HasRoles %v", bs[0].Engine(), backends.HasRoles(bs))
	}
	if err := p.SetBackends([]string{"decode+vllm+http://127.0.0.1:9", "http://127.0.0.1:11"}); err != nil {
		t.Fatal(err)
	}
	after := p.Backends()
	if after[0] == bs[0] || after[0].Role() != backends.RoleDecode || after[1] != bs[2] {
		t.Fatalf("role change kept the backend or replaced another")
	}
	plain, err := backends.NewPool([]string{"http://127.0.0.1:9", "sglang+http://127.0.0.1:10"}, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if backends.HasRoles(plain.Backends()) {
		t.Fatal("a fleet without roles has roles")
	}
	if _, err := backends.NewPool([]string{"prefil+http://127.0.0.1:9"}, backends.Options{}); err == nil {
		t.Fatal("NewPool took an unknown role")
	}
}

// TestBootstrapPortFromServerInfo: an SGLang prefill worker's bootstrap
// port is read from its /get_server_info; one not running disaggregated
// states none.
func TestBootstrapPortFromServerInfo(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want int
	}{{"prefill", 9123}, {"null", 0}} {
		mode := tc.mode
		if mode != "null" {
			mode = `"` + mode + `"`
		}
		eng := &fakeEngine{metrics: []string{fixture(t, "sglang.metrics")}, model: "m",
			serverInfo: `{"model_path":"m","max_total_num_tokens":1000,"disaggregation_mode":` + mode + `,"disaggregation_bootstrap_port":9123}`}
		srv := eng.start(t)
		p, err := backends.NewPool([]string{"prefill+sglang+" + srv.URL}, backends.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p.ScrapeAll(context.Background())
		if got := p.Backends()[0].BootstrapPort(); got != tc.want {
			t.Errorf("disaggregation_mode %s: bootstrap port %d, want %d", tc.mode, got, tc.want)
		}
	}
}
