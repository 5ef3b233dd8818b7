// Package config reads prefixgate's configuration: a YAML file, then
// PREFIXGATE_* environment variables, then command-line flags, each
// overriding the one before. It validates the result with messages that name
// the offending field, and turns it into the server's Config.
//
// It does not apply configuration; internal/server does, including reloads.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/route"
)

// File is the YAML configuration file. docs/configuration.md is a complete
// commented example.
type File struct {
	Listen       string   `yaml:"listen"`
	TLS          TLS      `yaml:"tls"`
	Backends     Backends `yaml:"backends"`
	Drain        []string `yaml:"drain"`
	Routing      Routing  `yaml:"routing"`
	Limits       Limits   `yaml:"limits"`
	Tenants      Tenants  `yaml:"tenants"`
	Admin        Admin    `yaml:"admin"`
	Log          Log      `yaml:"log"`
	Tracing      Tracing  `yaml:"tracing"`
	CORS         CORS     `yaml:"cors"`
	DrainTimeout Duration `yaml:"drain_timeout"`
	EPP          EPP      `yaml:"epp"`
}

// EPP sets the endpoint picker's ports (prefixgate epp); empty means the
// Gateway API Inference Extension defaults :9002, :9003 and :9090.
type EPP struct {
	// Listen serves the ext_proc gRPC service (and gRPC health).
	Listen string `yaml:"listen"`
	// HealthListen serves gRPC health alone.
	HealthListen string `yaml:"health_listen"`
	// MetricsListen serves /metrics over HTTP.
	MetricsListen string `yaml:"metrics_listen"`
}

// TLS serves HTTPS (HTTP/1.1 and HTTP/2) instead of cleartext.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Routing tunes the router.
type Routing struct {
	Policy       string   `yaml:"policy"`
	LoadFactor   float64  `yaml:"load_factor"`
	Threshold    int      `yaml:"threshold"`
	CacheTokens  int      `yaml:"cache_tokens"`
	PrefixLength int      `yaml:"prefix_length"`
	QueueDepth   int      `yaml:"queue_depth"`
	QueueWait    Duration `yaml:"queue_wait"`
	// Retries is a pointer so that 0 (no retry) differs from absent (the
	// default); a negative value also means the default.
	Retries *int `yaml:"retries"`
}

// Limits bound what one request may cost.
type Limits struct {
	MaxBodyBytes    int64    `yaml:"max_body_bytes"`
	MaxDecodedBytes int64    `yaml:"max_decoded_bytes"`
	MaxRatio        int      `yaml:"max_ratio"`
	MaxDepth        int      `yaml:"max_depth"`
	MaxStringBytes  int      `yaml:"max_string_bytes"`
	RequestTimeout  Duration `yaml:"request_timeout"`
	// ClientIdleTimeout closes a client connection that has waited this
	// long for its next request.
	ClientIdleTimeout Duration `yaml:"client_idle_timeout"`
}

// Tenants maps API keys to tenants; with any key set, every request must
// carry one and gets a per-tenant cache_salt.
type Tenants struct {
	// SecretEnv names the environment variable holding the HMAC secret.
	SecretEnv string `yaml:"secret_env"`
	// APIKeys maps an API key (sent as "Authorization: Bearer KEY") to a
	// tenant name.
	APIKeys map[string]string `yaml:"api_keys"`
}

// Admin is a second listener for pprof, off unless Listen is set.
type Admin struct {
	Listen string `yaml:"listen"`
	Pprof  bool   `yaml:"pprof"`
}

// Log sets the log format and level.
type Log struct {
	Format string `yaml:"format"` // text or json
	Level  string `yaml:"level"`  // debug, info, warn, error
}

// Tracing exports OpenTelemetry spans over OTLP/HTTP.
type Tracing struct {
	// OTLPEndpoint is the collector's base URL, e.g. http://collector:4318;
	// empty disables tracing.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
}

// CORS lets browsers (Connect-ES transports) call the router.
type CORS struct {
	// AllowedOrigins lists origins such as https://app.example.com, or "*".
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// Backends lists the backends: each entry a spec string (a URL, host:port,
// dns://, srv:// or file:// source, optionally prefixed ENGINE+ as in
// "sglang+http://10.0.0.5:30000") or a mapping with url and engine:
//
//	backends:
//	  - http://10.0.0.4:8000
//	  - url: http://10.0.0.5:8080
//	    engine: llamacpp   # auto (default), vllm, sglang or llamacpp
//
// A mapping becomes the ENGINE+URL string, the form the server and the
// --backend flag take.
type Backends []string

// UnmarshalYAML reads a sequence of strings and url/engine mappings.
func (l *Backends) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: backends must be a list", n.Line)
	}
	out := make(Backends, 0, len(n.Content))
	for i, item := range n.Content {
		switch item.Kind {
		case yaml.ScalarNode:
			out = append(out, item.Value)
		case yaml.MappingNode:
			var b struct {
				URL    string `yaml:"url"`
				Engine string `yaml:"engine"`
			}
			if err := strictDecode(item, &b); err != nil {
				return fmt.Errorf("line %d: backends[%d]: %w", item.Line, i, err)
			}
			if b.URL == "" {
				return fmt.Errorf("line %d: backends[%d]: url is required", item.Line, i)
			}
			e, err := backends.ParseEngine(b.Engine)
			if err != nil {
				return fmt.Errorf("line %d: backends[%d].engine: %w", item.Line, i, err)
			}
			prefixed, _, err := backends.SplitEngine(b.URL)
			if err != nil {
				return fmt.Errorf("line %d: backends[%d].url: %w", item.Line, i, err)
			}
			if prefixed != backends.EngineAuto && e != backends.EngineAuto {
				return fmt.Errorf("line %d: backends[%d]: url names engine %s and engine says %s; give one", item.Line, i, prefixed, e)
			}
			spec := b.URL
			if e != backends.EngineAuto {
				spec = e.String() + "+" + b.URL
			}
			out = append(out, spec)
		default:
			return fmt.Errorf("line %d: backends[%d] is neither a URL nor a url/engine mapping", item.Line, i)
		}
	}
	*l = out
	return nil
}

// strictDecode decodes a mapping node into v, rejecting unknown keys.
func strictDecode(n *yaml.Node, v any) error {
	raw, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// Duration reads "250ms", "30s", "5m".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration like 250ms or 30s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Load reads and strictly decodes a YAML file: unknown fields are errors.
func Load(path string) (File, error) {
	var f File
	raw, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	keys, err := checkKeys(path, raw)
	if err != nil {
		return f, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return f, decodeError(path, err, keys)
	}
	return f, nil
}

// ApplyEnv overrides f with PREFIXGATE_* variables from lookup (os.LookupEnv
// in production): PREFIXGATE_LISTEN, PREFIXGATE_BACKENDS (comma-separated),
// PREFIXGATE_POLICY, PREFIXGATE_LOAD_FACTOR, PREFIXGATE_THRESHOLD,
// PREFIXGATE_PREFIX_LENGTH, PREFIXGATE_MAX_BODY_BYTES,
// PREFIXGATE_REQUEST_TIMEOUT, PREFIXGATE_CLIENT_IDLE_TIMEOUT, PREFIXGATE_DRAIN_TIMEOUT, PREFIXGATE_LOG_FORMAT,
// PREFIXGATE_LOG_LEVEL, PREFIXGATE_OTLP_ENDPOINT.
func ApplyEnv(f *File, lookup func(string) (string, bool)) error {
	var errs []error
	str := func(name string, dst *string) {
		if v, ok := lookup(name); ok {
			*dst = v
		}
	}
	integer := func(name string, dst *int) {
		if v, ok := lookup(name); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not an integer", name, v))
				return
			}
			*dst = n
		}
	}
	dur := func(name string, dst *Duration) {
		if v, ok := lookup(name); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a duration", name, v))
				return
			}
			*dst = Duration(d)
		}
	}
	str("PREFIXGATE_LISTEN", &f.Listen)
	if v, ok := lookup("PREFIXGATE_BACKENDS"); ok {
		f.Backends = splitList(v)
	}
	str("PREFIXGATE_POLICY", &f.Routing.Policy)
	if v, ok := lookup("PREFIXGATE_LOAD_FACTOR"); ok {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("PREFIXGATE_LOAD_FACTOR: %q is not a number", v))
		}
		f.Routing.LoadFactor = x
	}
	integer("PREFIXGATE_THRESHOLD", &f.Routing.Threshold)
	integer("PREFIXGATE_PREFIX_LENGTH", &f.Routing.PrefixLength)
	if v, ok := lookup("PREFIXGATE_MAX_BODY_BYTES"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("PREFIXGATE_MAX_BODY_BYTES: %q is not an integer", v))
		}
		f.Limits.MaxBodyBytes = n
	}
	dur("PREFIXGATE_REQUEST_TIMEOUT", &f.Limits.RequestTimeout)
	dur("PREFIXGATE_CLIENT_IDLE_TIMEOUT", &f.Limits.ClientIdleTimeout)
	dur("PREFIXGATE_DRAIN_TIMEOUT", &f.DrainTimeout)
	str("PREFIXGATE_LOG_FORMAT", &f.Log.Format)
	str("PREFIXGATE_OTLP_ENDPOINT", &f.Tracing.OTLPEndpoint)
	str("PREFIXGATE_LOG_LEVEL", &f.Log.Level)
	return errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Validate checks what the server's own validation does not: file-level
// fields. Messages name the YAML field.
func (f File) Validate() error {
	if (f.TLS.CertFile == "") != (f.TLS.KeyFile == "") {
		return errors.New("tls: set both cert_file and key_file, or neither")
	}
	if p := f.Routing.Policy; p != "" && !slices.Contains(route.Policies(), p) {
		return fmt.Errorf("routing.policy: %q is not a routing policy (have %s)", p, strings.Join(route.Policies(), ", "))
	}
	if f.Log.Format != "" && f.Log.Format != "text" && f.Log.Format != "json" {
		return fmt.Errorf("log.format: %q is not text or json", f.Log.Format)
	}
	switch f.Log.Level {
	case "", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: %q is not debug, info, warn or error", f.Log.Level)
	}
	if len(f.Tenants.APIKeys) > 0 {
		if f.Tenants.SecretEnv == "" {
			return errors.New("tenants.secret_env: required when tenants.api_keys is set")
		}
		for key, tenant := range f.Tenants.APIKeys {
			if len(key) < 16 {
				return fmt.Errorf("tenants.api_keys: a key for tenant %q is shorter than 16 characters", tenant)
			}
			if tenant == "" {
				return errors.New("tenants.api_keys: a key maps to an empty tenant name")
			}
		}
	}
	if e := f.Tracing.OTLPEndpoint; e != "" && !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
		return fmt.Errorf("tracing.otlp_endpoint: %q is not an http:// or https:// URL", e)
	}
	for _, o := range f.CORS.AllowedOrigins {
		if o != "*" && !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return fmt.Errorf("cors.allowed_origins: %q is not \"*\" or an http(s) origin", o)
		}
	}
	if f.DrainTimeout < 0 {
		return errors.New("drain_timeout: must not be negative")
	}
	return nil
}

// ServerConfig converts f into the server's Config; lookup reads the tenant
// secret's environment variable.
func (f File) ServerConfig(lookup func(string) (string, bool)) (server.Config, error) {
	if err := f.Validate(); err != nil {
		return server.Config{}, err
	}
	c := server.Config{
		Backends:          f.Backends,
		Policy:            f.Routing.Policy,
		LoadFactor:        f.Routing.LoadFactor,
		Threshold:         f.Routing.Threshold,
		CacheTokens:       f.Routing.CacheTokens,
		PrefixLength:      f.Routing.PrefixLength,
		QueueDepth:        f.Routing.QueueDepth,
		QueueWait:         time.Duration(f.Routing.QueueWait),
		Retries:           f.Routing.Retries,
		MaxBodyBytes:      f.Limits.MaxBodyBytes,
		MaxDecodedBytes:   f.Limits.MaxDecodedBytes,
		MaxRatio:          f.Limits.MaxRatio,
		MaxDepth:          f.Limits.MaxDepth,
		MaxStringBytes:    f.Limits.MaxStringBytes,
		Drain:             f.Drain,
		RequestTimeout:    time.Duration(f.Limits.RequestTimeout),
		ClientIdleTimeout: time.Duration(f.Limits.ClientIdleTimeout),
		Tenants:           f.Tenants.APIKeys,
		TraceEndpoint:     strings.TrimSuffix(f.Tracing.OTLPEndpoint, "/"),
		CORSOrigins:       f.CORS.AllowedOrigins,
	}
	if len(f.Tenants.APIKeys) > 0 {
		secret, ok := lookup(f.Tenants.SecretEnv)
		if !ok || len(secret) < 16 {
			return server.Config{}, fmt.Errorf("tenants.secret_env: environment variable %s must hold a secret of at least 16 characters", f.Tenants.SecretEnv)
		}
		c.TenantSecret = []byte(secret)
	}
	return c, nil
}
