package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// load loads serve's settings from a file holding yaml (none when empty),
// the variables in vars and the flags in args.
func load(t *testing.T, yaml string, vars map[string]string, args ...string) (Settings, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fl := RegisterFlags(fs, Serve)
	if yaml != "" {
		args = append([]string{"--config", write(t, yaml)}, args...)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fl.Load(env(vars))
}

func TestLoadFileEnvAndFlags(t *testing.T) {
	s, err := load(t, `
listen: 127.0.0.1:9000
backends: [http://a:8000, http://b:8000]
routing:
  policy: least-outstanding
  load_factor: 1.5
  threshold: 300
  queue_wait: 250ms
limits:
  request_timeout: 30s
  client_idle_timeout: 45s
tenants:
  secret_env: TEST_SECRET
  api_keys:
    key-for-tenant-a-0001: tenant-a
`, map[string]string{"PREFIXGATE_POLICY": "random", "PREFIXGATE_THRESHOLD": "200", "TEST_SECRET": "0123456789abcdef0123"}, "--threshold", "100")
	if err != nil {
		t.Fatal(err)
	}
	c := s.Server
	if c.Route.Policy != "random" || c.Route.LoadFactor != 1.5 || c.Route.DefaultThreshold != 100 || c.Route.QueueWait != 250*time.Millisecond ||
		c.RequestTimeout != 30*time.Second || c.ClientIdleTimeout != 45*time.Second ||
		len(c.Backends) != 2 || c.Pipeline.Tenants["key-for-tenant-a-0001"] != "tenant-a" || string(c.Pipeline.TenantSecret) != "0123456789abcdef0123" {
		t.Errorf("config = %+v", c)
	}
	if s.Listen != "127.0.0.1:9000" || s.DrainTimeout != 30*time.Second || s.LogLevel != "info" || s.LogFormat != "text" || s.ConfigPoll != 2*time.Second {
		t.Errorf("settings = %+v", s)
	}
}

// TestEmptyMeansDefault: an empty variable or a zero in the file leaves
// the default, as before; --config-poll 0 is a value (only SIGHUP).
func TestEmptyMeansDefault(t *testing.T) {
	s, err := load(t, "backends: [http://a:1]\ndrain_timeout: 0s\nlisten: \"\"\n", map[string]string{"PREFIXGATE_LOG_FORMAT": "", "PREFIXGATE_LOG_LEVEL": ""})
	if err != nil {
		t.Fatal(err)
	}
	if s.DrainTimeout != 30*time.Second || s.Listen != "127.0.0.1:8080" || s.LogFormat != "text" || s.LogLevel != "info" || s.ConfigPoll != 2*time.Second {
		t.Errorf("settings = %+v", s)
	}
}

// TestFlagsKeepTheirMeaning: the flags that set more than a plain field.
func TestFlagsKeepTheirMeaning(t *testing.T) {
	s, err := load(t, "", nil, "--backend", "http://a:1,http://b:1", "--backend", "http://c:1", "--log-json", "--admin-listen", "127.0.0.1:0",
		"--fast-http1=false", "--config-poll", "0", "--retries", "0", "--probe-interval", "5s", "--backend-idle-timeout", "1m")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Server.Backends, " ") != "http://a:1 http://b:1 http://c:1" || s.LogFormat != "json" || !s.AdminPprof || s.AdminListen != "127.0.0.1:0" ||
		!s.Server.StdlibHTTP1 || s.ConfigPoll != 0 || *s.Server.Retries != 0 || s.Server.Pool.ProbeInterval != 5*time.Second || s.Server.Pool.IdleTimeout != time.Minute {
		t.Errorf("settings = %+v", s)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	const b = "backends: [http://a:8000]\n"
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		args       []string
		want       string
	}{
		{"unknown field", b + "routing:\n  polcy: random\n", nil, nil, ":3: routing.polcy: unknown key (did you mean routing.policy?)"},
		{"bad duration", b + "drain_timeout: soon\n", nil, nil, `:2: drain_timeout: "soon" is not a duration`},
		{"half tls", b + "tls:\n  cert_file: a.pem\n", nil, nil, "tls: set both"},
		{"log format", b + "log:\n  format: xml\n", nil, nil, `:3: log.format: "xml" is not text or json`},
		{"tenants without secret", b + "tenants:\n  api_keys:\n    key-for-tenant-a-0001: a\n", nil, nil, "tenants.secret_env: required"},
		{"short secret", b + "tenants:\n  secret_env: S\n  api_keys:\n    key-for-tenant-a-0001: a\n", map[string]string{"S": "short"}, nil, "at least 16"},
		{"short api key", b + "tenants:\n  secret_env: S\n  api_keys:\n    k: a\n", map[string]string{"S": "0123456789abcdef"}, nil, ":4: tenants.api_keys: a key for tenant \"a\" is shorter than 16"},
		{"otlp endpoint", b + "tracing:\n  otlp_endpoint: collector:4318\n", nil, nil, ":3: tracing.otlp_endpoint: \"collector:4318\" is not"},
		{"cors origin", b + "cors:\n  allowed_origins: [example.com]\n", nil, nil, ":3: cors.allowed_origins:"},
		{"env not a number", b, map[string]string{"PREFIXGATE_THRESHOLD": "many"}, nil, `PREFIXGATE_THRESHOLD: "many" is not an integer`},
		{"env out of range", b, map[string]string{"PREFIXGATE_THRESHOLD": "5000"}, nil, "PREFIXGATE_THRESHOLD: 5000 is outside 1..1024"},
		{"flag out of range", b + "routing:\n  load_factor: 2\n", nil, []string{"--load-factor", "0.5"}, "--load-factor: 0.5 is below 1"},
		{"file out of range", b + "routing:\n  load_factor: 0.5\n", nil, nil, ":3: routing.load_factor: 0.5 is below 1"},
		{"policy", b + "routing:\n  policy: fastest\n", nil, nil, `:3: routing.policy: "fastest" is not a routing policy (have consistent-hash,`},
		{"no backend", "listen: :1\n", nil, nil, "backends: at least one backend URL is required"},
		{"string limit", b + "limits:\n  max_string_bytes: 8\n", nil, nil, ":3: limits.max_string_bytes: 8 is outside 16.."},
		{"drain", b + "drain: [\"http://b:8000/\"]\n", nil, nil, ":2: drain: entry 0"},
		{"int given a float", b + "limits:\n  max_depth: 1.5\n", nil, nil, `:3: limits.max_depth: "1.5" is not an integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml, tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want one containing %q", err, tc.want)
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
		s, err := load(t, "backends: [http://a:8000]\n"+tc.yaml, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := s.Server.Defaults()
		if *c.Retries != tc.want {
			t.Errorf("%q: retries = %d, want %d", tc.yaml, *c.Retries, tc.want)
		}
		if c.Route.QueueWait != 0 {
			t.Errorf("%q: queue wait = %v; the server must leave it to route", tc.yaml, c.Route.QueueWait)
		}
	}
}

func TestEPPSection(t *testing.T) {
	fs := flag.NewFlagSet("epp", flag.ContinueOnError)
	fl := RegisterFlags(fs, EPP)
	p := write(t, "backends: [http://10.0.0.1:8000]\nepp:\n  listen: 127.0.0.1:9102\n  health_listen: 127.0.0.1:9103\n")
	if err := fs.Parse([]string{"--config", p, "--metrics-listen", "off"}); err != nil {
		t.Fatal(err)
	}
	s, err := fl.Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.EPPListen != "127.0.0.1:9102" || s.EPPHealthListen != "127.0.0.1:9103" || s.EPPMetricsListen != "off" {
		t.Fatalf("epp settings = %+v", s)
	}
	if _, err := load(t, "epp:\n  grpc_listen: :1\n", nil); err == nil || !strings.Contains(err.Error(), "epp.grpc_listen: unknown key") {
		t.Fatalf("unknown epp field: err = %v, want one naming grpc_listen", err)
	}
}

// TestBackendEngines: a backend entry is a spec string (optionally
// ENGINE+URL) or a url/engine mapping; both become the ENGINE+URL spec the
// server takes, and mistakes name the entry.
func TestBackendEngines(t *testing.T) {
	s, err := load(t, `
backends:
  - http://10.0.0.4:8000
  - sglang+http://10.0.0.5:30000
  - url: http://10.0.0.6:8080
    engine: llamacpp
  - url: dns://vllm.svc:8000
    engine: auto
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://10.0.0.4:8000", "sglang+http://10.0.0.5:30000", "llamacpp+http://10.0.0.6:8080", "dns://vllm.svc:8000"}
	if strings.Join(s.Server.Backends, " ") != strings.Join(want, " ") {
		t.Fatalf("backends %q, want %q", s.Server.Backends, want)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"backends:\n  - url: http://a:1\n    engine: tgi\n", ":2: backends[0].engine"},
		{"backends:\n  - x\n  - engine: vllm\n", ":3: backends[1]: url is required"},
		{"backends:\n  - url: http://a:1\n    engin: vllm\n", ":3: backends[0]: unknown key \"engin\""},
		{"backends:\n  - url: sglang+http://a:1\n    engine: vllm\n", "give one"},
		{"backends: http://a:1\n", ":1: backends must be a list"},
		{"backends:\n  - [a]\n", ":2: backends[0] is neither a URL"},
	} {
		if _, err := load(t, tc.yaml, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.yaml, err, tc.want)
		}
	}
}

// TestLoadErrorsNameKeyAndLine: errors name the YAML key (dotted) and the
// line the mistake is on, never a Go type or field.
func TestLoadErrorsNameKeyAndLine(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"listen: :8080\nrouting:\n  polcy: random\n", ":3: routing.polcy: unknown key (did you mean routing.policy?)"},
		{"routing:\n  threshold: lots\n", `:2: routing.threshold: "lots" is not an integer`},
		{"limits:\n  request_timeout: soon\n", `:2: limits.request_timeout: "soon" is not a duration`},
		{"backends: [a]\nfoo: 1\n", ":2: foo: unknown key; the keys at the top level are admin, backends,"},
		{"routing: [1, 2]\n", ":1: routing: a list where a mapping is wanted"},
		{"routing:\n  policy: [\n", "c.yaml:2: did not find expected node content"},
		{"listen: a\nrouting:\n  threshold: 5\n  threshold: 6\n", ":4: routing.threshold: key already given on line 3"},
		{"tls: x\n", `:1: tls: "x" is not a mapping`},
		{"cors:\n  allowed_origins: x\n", `:2: cors.allowed_origins: "x" is not a list of strings`},
		{"limits: &l\n  max_depth: 9\nrouting: *l\n", ":2: routing.max_depth: unknown key"},
		{"backends: [a]\nflow_control:\n  objectives:\n    x: high\n", `:3: flow_control.objectives.x: "high" is not an integer priority`},
		{"backends: [a]\nflow_control:\n  objectives: {hi: 5}\n  tenant_objectives: {t: mid}\n", `:4: flow_control.tenant_objectives.t: flowcontrol: unknown objective "mid" (flow_control.objectives defines [hi])`},
	} {
		_, err := load(t, tc.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
			continue
		}
		for _, goName := range []string{"config.", "not found in type", "!!", "Server.", "Route."} {
			if strings.Contains(err.Error(), goName) {
				t.Errorf("%q: error %q shows a Go name (%s)", tc.yaml, err, goName)
			}
		}
	}
}

// TestYAMLSyntaxErrorLine: a syntax error is reported on the line it is
// on, not the line where the block around it began (the parser's own
// message says line 1 for each of these).
func TestYAMLSyntaxErrorLine(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"listen: a\n- b\n", ":2: did not find expected key"},
		{"listen: a\n]\n", ":2: did not find expected key"},
		{"listen: a\nbackends: [http://a:1]\nrouting:\n  policy: random\n  - x\n", ":5: "},
		{"listen: a\nb: @x\n", ":2: found character that cannot start any token"},
	} {
		_, err := load(t, tc.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}
