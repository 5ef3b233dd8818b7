package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
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
  client_idle_timeout: 45s
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
	if c.Policy != "random" || c.LoadFactor != 1.5 || c.QueueWait != 250*time.Millisecond || c.RequestTimeout != 30*time.Second || c.ClientIdleTimeout != 45*time.Second ||
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

// TestRetriesZeroMeansNone: retries 0 is no retry; an absent or negative
// value is the server's default. Queue wait left unset stays unset here:
// route applies its own default.
func TestRetriesZeroMeansNone(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
	}{
		{"routing:\n  retries: 0\n", 0},
		{"routing:\n  retries: 5\n", 5},
		{"routing:\n  retries: -1\n", server.DefaultRetries},
		{"routing:\n  policy: random\n", server.DefaultRetries},
	} {
		f, err := Load(write(t, "backends: [http://a:8000]\n"+tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.ServerConfig(env(nil))
		if err != nil {
			t.Fatal(err)
		}
		c = c.Defaults()
		if err := c.Validate(); err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if *c.Retries != tc.want {
			t.Errorf("%q: retries = %d, want %d", tc.yaml, *c.Retries, tc.want)
		}
		if c.QueueWait != 0 {
			t.Errorf("%q: queue wait = %v; the server must leave it to route", tc.yaml, c.QueueWait)
		}
	}
}

func TestLimitsAndDrain(t *testing.T) {
	f, err := Load(write(t, "backends: [http://a:8000, http://b:8000]\ndrain: [b:8000]\nlimits:\n  max_string_bytes: 65536\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.ServerConfig(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxStringBytes != 65536 || len(c.Drain) != 1 || c.Drain[0] != "b:8000" {
		t.Errorf("config = %+v", c)
	}
	for _, bad := range []string{"limits:\n  max_string_bytes: 8\n", "drain: [\"http://b:8000/\"]\n"} {
		f, err := Load(write(t, "backends: [http://a:8000]\n"+bad))
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.ServerConfig(env(nil))
		if err == nil {
			err = c.Defaults().Validate()
		}
		want := strings.SplitN(strings.TrimSpace(bad), ":", 2)[0]
		if want == "limits" {
			want = "max_string_bytes"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v; want one naming %s", bad, err, want)
		}
	}
}

func TestEPPSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("backends: [http://10.0.0.1:8000]\nepp:\n  listen: 127.0.0.1:9102\n  health_listen: 127.0.0.1:9103\n  metrics_listen: \"off\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.EPP != (EPP{Listen: "127.0.0.1:9102", HealthListen: "127.0.0.1:9103", MetricsListen: "off"}) {
		t.Fatalf("epp section = %+v", f.EPP)
	}
	if err := os.WriteFile(path, []byte("epp:\n  grpc_listen: :1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "grpc_listen") {
		t.Fatalf("unknown epp field: err = %v, want one naming grpc_listen", err)
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
