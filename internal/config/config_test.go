package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prefixgate.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadAndConvert(t *testing.T) {
	p := write(t, `
listen: 127.0.0.1:9000
backends: [http://a:8000, http://b:8000]
routing:
  policy: least-outstanding
  load_factor: 1.5
  queue_wait: 250ms
limits:
  request_timeout: 30s
tenants:
  secret_env: TEST_SECRET
  api_keys:
    key-for-tenant-a-0001: tenant-a
`)
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyEnv(&f, env(map[string]string{"PREFIXGATE_POLICY": "random"})); err != nil {
		t.Fatal(err)
	}
	c, err := f.ServerConfig(env(map[string]string{"TEST_SECRET": "0123456789abcdef0123"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy != "random" || c.LoadFactor != 1.5 || c.QueueWait != 250*time.Millisecond || c.RequestTimeout != 30*time.Second ||
		len(c.Backends) != 2 || c.Tenants["key-for-tenant-a-0001"] != "tenant-a" || string(c.TenantSecret) != "0123456789abcdef0123" {
		t.Errorf("config = %+v", c)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"unknown field", "routing:\n  polcy: random\n", nil, "polcy"},
		{"bad duration", "drain_timeout: soon\n", nil, "soon"},
		{"half tls", "tls:\n  cert_file: a.pem\n", nil, "tls"},
		{"log format", "log:\n  format: xml\n", nil, "log.format"},
		{"tenants without secret", "tenants:\n  api_keys:\n    key-for-tenant-a-0001: a\n", nil, "tenants.secret_env"},
		{"short secret", "tenants:\n  secret_env: S\n  api_keys:\n    key-for-tenant-a-0001: a\n", map[string]string{"S": "short"}, "at least 16"},
		{"short api key", "tenants:\n  secret_env: S\n  api_keys:\n    k: a\n", nil, "shorter than 16"},
		{"otlp endpoint", "tracing:\n  otlp_endpoint: collector:4318\n", nil, "tracing.otlp_endpoint"},
		{"cors origin", "cors:\n  allowed_origins: [example.com]\n", nil, "cors.allowed_origins"},
		{"env not a number", "", map[string]string{"PREFIXGATE_THRESHOLD": "many"}, "PREFIXGATE_THRESHOLD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Load(write(t, tc.yaml))
			if err == nil {
				err = ApplyEnv(&f, env(tc.env))
			}
			if err == nil {
				_, err = f.ServerConfig(env(tc.env))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want one naming %q", err, tc.want)
			}
		})
	}
}

// TestBackendEngines: a backend entry is a spec string (optionally
// ENGINE+URL) or a url/engine mapping; both become the ENGINE+URL spec the
// server takes, and mistakes name the entry.
func TestBackendEngines(t *testing.T) {
	f, err := Load(write(t, `
backends:
  - http://10.0.0.4:8000
  - sglang+http://10.0.0.5:30000
  - url: http://10.0.0.6:8080
    engine: llamacpp
  - url: dns://vllm.svc:8000
    engine: auto
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://10.0.0.4:8000", "sglang+http://10.0.0.5:30000", "llamacpp+http://10.0.0.6:8080", "dns://vllm.svc:8000"}
	if strings.Join(f.Backends, " ") != strings.Join(want, " ") {
		t.Fatalf("backends %q, want %q", f.Backends, want)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"backends:\n  - url: http://a:1\n    engine: tgi\n", "backends[0].engine"},
		{"backends:\n  - x\n  - engine: vllm\n", "backends[1]: url is required"},
		{"backends:\n  - url: http://a:1\n    engin: vllm\n", "backends[0]"},
		{"backends:\n  - url: sglang+http://a:1\n    engine: vllm\n", "give one"},
		{"backends: http://a:1\n", "must be a list"},
		{"backends:\n  - [a]\n", "neither a URL"},
	} {
		if _, err := Load(write(t, tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %q", tc.yaml, err, tc.want)
		}
	}
}
