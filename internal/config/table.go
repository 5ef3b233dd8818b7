package config

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// Cmd is a set of commands whose flags include a setting.
type Cmd uint8

// The commands that read the configuration.
const (
	Serve Cmd = 1 << iota
	EPP
	Both = Serve | EPP
)

// Entry is one setting under its three names. Field is the Settings field
// it sets; its type says how a value is read (a duration, an integer, a
// comma-separated list ...).
type Entry struct {
	Key     string // dotted file key (routing.policy); "" for a flag only
	Flag    string // flag name without dashes; "" for none
	Env     string // environment variable; "" for none
	Field   string // Settings field, dotted (Server.Route.LoadFactor)
	Default string // as --help and docs/configuration.md show it
	Doc     string // what it does, one line
	Cmds    Cmd    // the commands that have Flag
	Reload  bool   // applies on reload, without a restart
	// keepZero keeps a zero given for a setting of the command's own,
	// which otherwise means its default (as the server's settings do).
	keepZero bool
	// set, when not nil, applies a value in place of the field's plain
	// parse (a flag that sets two fields, or one inverted).
	set func(s *Settings, v string) error
}

// Table is every setting. A Settings field that no entry sets is listed
// in Internal; a test holds both to the structs and docs/configuration.md
// to the table.
var Table = []Entry{
	{Flag: "config", Field: "ConfigPath", Cmds: Both, Doc: "YAML configuration file; reloaded on SIGHUP and when its content changes"},
	{Flag: "config-poll", Field: "ConfigPoll", Default: "2s", Cmds: Both, keepZero: true, Doc: "how often to check --config for changes (0: only on SIGHUP)"},
	{Key: "listen", Flag: "listen", Env: "PREFIXGATE_LISTEN", Field: "Listen", Default: "127.0.0.1:8080", Cmds: Serve, Doc: "address to serve HTTP/1.1 and h2c (or TLS) on"},
	{Key: "tls.cert_file", Flag: "tls-cert", Field: "TLSCertFile", Cmds: Serve, Doc: "TLS certificate file (with the key: serve HTTPS and HTTP/2)"},
	{Key: "tls.key_file", Flag: "tls-key", Field: "TLSKeyFile", Cmds: Serve, Doc: "TLS private key file"},
	{Key: "backends", Flag: "backend", Env: "PREFIXGATE_BACKENDS", Field: "Server.Backends", Cmds: Both, Reload: true,
		Doc: "backend base URLs, optionally [ROLE+][ENGINE+]URL with ROLE prefill, decode or both and ENGINE auto, vllm, sglang or llamacpp (flag repeatable; flag and variable comma-separated)"},
	{Key: "drain", Field: "Server.Drain", Reload: true, Doc: "backends (host:port) that take no new requests"},
	{Key: "routing.policy", Flag: "policy", Env: "PREFIXGATE_POLICY", Field: "Server.Route.Policy", Default: route.DefaultPolicy, Cmds: Both, Reload: true,
		Doc: "routing policy: prefix-index, prefix-aware, least-outstanding, random or consistent-hash"},
	{Key: "routing.load_factor", Flag: "load-factor", Env: "PREFIXGATE_LOAD_FACTOR", Field: "Server.Route.LoadFactor", Default: ftoa(route.DefaultLoadFactor), Cmds: Both, Reload: true,
		Doc: "bounded-load factor c (>= 1)"},
	{Key: "routing.threshold", Flag: "threshold", Env: "PREFIXGATE_THRESHOLD", Field: "Server.Route.DefaultThreshold", Default: strconv.Itoa(route.DefaultThreshold), Cmds: Both, Reload: true,
		Doc: fmt.Sprintf("per-backend concurrency threshold (1..%d)", route.MaxThreshold)},
	{Key: "routing.cache_tokens", Flag: "cache-tokens", Env: "PREFIXGATE_CACHE_TOKENS", Field: "Server.Route.DefaultCacheTokens", Default: strconv.Itoa(route.DefaultCacheTokens), Cmds: Both, Reload: true,
		Doc: "each backend's KV cache in tokens, which prefix-index remembers about"},
	{Key: "routing.prefix_length", Flag: "prefix-length", Env: "PREFIXGATE_PREFIX_LENGTH", Field: "Server.Pipeline.PrefixLength", Default: strconv.Itoa(normalize.DefaultPrefixLength), Cmds: Both,
		Doc: fmt.Sprintf("routing window N in characters (%d..%d)", normalize.MinPrefixLength, normalize.MaxPrefixLength)},
	{Key: "routing.split_interference", Env: "PREFIXGATE_SPLIT_INTERFERENCE", Field: "Server.Route.SplitInterference", Default: ftoa(route.DefaultSplitInterference), Reload: true,
		Doc: "prefill/decode split: work per uncached prompt token prefilled on a decode worker, per request decoding there (negative: 0; docs/disaggregation.md)"},
	{Key: "routing.split_transfer_weight", Env: "PREFIXGATE_SPLIT_TRANSFER_WEIGHT", Field: "Server.Route.SplitTransferWeight", Default: ftoa(route.DefaultSplitTransferWeight), Reload: true,
		Doc: "prefill/decode split: work of moving one token's KV from the prefill to the decode worker (negative: 0)"},
	{Key: "routing.split_min_tokens", Env: "PREFIXGATE_SPLIT_MIN_TOKENS", Field: "Server.Route.SplitMinTokens", Default: strconv.Itoa(route.DefaultSplitMinTokens), Reload: true,
		Doc: "prefill/decode split: fewest prompt tokens uncached on the decode worker for a request to be split (negative: 0)"},
	{Key: "routing.queue_depth", Flag: "queue-depth", Env: "PREFIXGATE_QUEUE_DEPTH", Field: "Server.Route.QueueDepth", Default: strconv.Itoa(route.DefaultQueueDepth), Cmds: Both, Reload: true,
		Doc: "requests that may wait when every backend is full (negative: none)"},
	{Key: "routing.queue_wait", Flag: "queue-wait", Env: "PREFIXGATE_QUEUE_WAIT", Field: "Server.Route.QueueWait", Default: route.DefaultQueueWait.String(), Cmds: Both, Reload: true,
		Doc: "longest wait for a free backend before 429 (negative: none)"},
	{Key: "routing.retries", Flag: "retries", Env: "PREFIXGATE_RETRIES", Field: "Server.Retries", Default: strconv.Itoa(server.DefaultRetries), Cmds: Both,
		Doc: "other backends to try when one sends nothing back (0: none; negative: the default)"},
	{Key: "routing.retry_sent", Flag: "retry-sent", Env: "PREFIXGATE_RETRY_SENT", Field: "Server.RetrySent", Default: "true", Cmds: Both, set: setRetrySent,
		Doc: "also retry a request that may have reached the backend before it failed, which may then run twice (false: at most once)"},
	{Key: "disaggregation.split", Flag: "disagg-split", Env: "PREFIXGATE_DISAGG_SPLIT", Field: "Server.Disagg.Split", Default: server.SplitCost, Cmds: Both,
		Doc: "in a fleet with prefill+ and decode+ backends: cost (split when the cost model says it pays) or always (split every generation request while a prefill worker has room)"},
	{Key: "disaggregation.protocol", Flag: "disagg-protocol", Env: "PREFIXGATE_DISAGG_PROTOCOL", Field: "Server.Disagg.Protocol", Default: server.ProtocolAuto, Cmds: Serve,
		Doc: "how a split request's legs are sent: vllm (KV connector, kv_transfer_params), sglang (bootstrap) or auto (from the prefill worker's engine)"},
	{Key: "disaggregation.bootstrap_port", Flag: "disagg-bootstrap-port", Env: "PREFIXGATE_DISAGG_BOOTSTRAP_PORT", Field: "Server.Disagg.BootstrapPort", Default: "0", Cmds: Serve,
		Doc: fmt.Sprintf("port of the prefill workers' SGLang bootstrap servers (0: as each one's /get_server_info states, else %d; -1: each one's own HTTP port)", server.DefaultBootstrapPort)},
	{Key: "disaggregation.prefill_timeout", Flag: "disagg-prefill-timeout", Env: "PREFIXGATE_DISAGG_PREFILL_TIMEOUT", Field: "Server.Disagg.PrefillTimeout", Default: server.DefaultPrefillTimeout.String(), Cmds: Serve,
		Doc: "longest a prefill leg may take before it counts as failed (the request's own timeout bounds it too)"},
	{Key: "disaggregation.prefill_retries", Flag: "disagg-prefill-retries", Env: "PREFIXGATE_DISAGG_PREFILL_RETRIES", Field: "Server.Disagg.PrefillRetries", Default: strconv.Itoa(server.DefaultPrefillRetries), Cmds: Serve,
		Doc: "other prefill workers a failed prefill leg is tried on before the request runs aggregated on its decode worker (negative: the default)"},
	{Key: "health.probe_interval", Flag: "probe-interval", Env: "PREFIXGATE_PROBE_INTERVAL", Field: "Server.Pool.ProbeInterval", Default: backends.DefaultProbeInterval.String(), Cmds: Both,
		Doc: "how often each backend's /health is probed"},
	{Key: "limits.max_body_bytes", Flag: "max-body-bytes", Env: "PREFIXGATE_MAX_BODY_BYTES", Field: "Server.Pipeline.MaxBodyBytes", Default: strconv.Itoa(pipeline.DefaultMaxBodyBytes), Cmds: Both,
		Doc: "largest request body accepted (413 above)"},
	{Key: "limits.max_decoded_bytes", Flag: "max-decoded-bytes", Env: "PREFIXGATE_MAX_DECODED_BYTES", Field: "Server.Pipeline.MaxDecodedBytes", Default: strconv.Itoa(pipeline.DefaultMaxDecodedBytes), Cmds: Both,
		Doc: "largest body once its Content-Encoding is decoded (413 above)"},
	{Key: "limits.max_ratio", Flag: "max-ratio", Env: "PREFIXGATE_MAX_RATIO", Field: "Server.Pipeline.MaxRatio", Default: strconv.Itoa(pipeline.DefaultMaxRatio), Cmds: Both,
		Doc: "largest decoded/encoded size ratio of a compressed body (413 above)"},
	{Key: "limits.max_depth", Flag: "max-depth", Env: "PREFIXGATE_MAX_DEPTH", Field: "Server.Pipeline.MaxDepth", Default: strconv.Itoa(pipeline.DefaultMaxDepth), Cmds: Both,
		Doc: "deepest JSON nesting accepted (400 above)"},
	{Key: "limits.max_string_bytes", Flag: "max-string-bytes", Env: "PREFIXGATE_MAX_STRING_BYTES", Field: "Server.Pipeline.MaxStringBytes", Default: strconv.Itoa(pipeline.DefaultMaxStringBytes), Cmds: Both,
		Doc: "largest JSON string or number literal in a body, in input bytes (400 above; at most the decoded body limit)"},
	{Key: "limits.max_upload_bytes", Flag: "max-upload-bytes", Env: "PREFIXGATE_MAX_UPLOAD_BYTES", Field: "Server.MaxUploadBytes", Default: strconv.Itoa(server.DefaultMaxUploadBytes), Cmds: Serve,
		Doc: "largest multipart upload (audio), streamed through, not held (413 above)"},
	{Key: "limits.request_timeout", Flag: "request-timeout", Env: "PREFIXGATE_REQUEST_TIMEOUT", Field: "Server.RequestTimeout", Default: durString(server.DefaultRequestTimeout), Cmds: Both,
		Doc: "end-to-end limit per request (504 past it)"},
	{Key: "limits.client_idle_timeout", Flag: "client-idle-timeout", Env: "PREFIXGATE_CLIENT_IDLE_TIMEOUT", Field: "Server.ClientIdleTimeout", Default: durString(server.DefaultClientIdleTimeout), Cmds: Both,
		Doc: "close a client connection that waits this long for its next request"},
	{Key: "limits.backend_idle_timeout", Flag: "backend-idle-timeout", Env: "PREFIXGATE_BACKEND_IDLE_TIMEOUT", Field: "Server.Pool.IdleTimeout", Default: durString(server.DefaultIdleTimeout), Cmds: Both,
		Doc: "fail a backend response that sends nothing for this long"},
	{Key: "responses.max_ids", Field: "Server.ResponsesMaxIDs", Default: strconv.Itoa(server.DefaultResponsesMaxIDs),
		Doc: "Responses ids remembered with the backend that stored them, least recently used evicted first (a follow-up naming a forgotten id gets 404)"},
	{Key: "routing.session_header", Field: "Server.SessionHeader", Default: server.DefaultSessionHeader,
		Doc: "request header whose value keeps a conversation on one backend while it is healthy and under its bound"},
	{Key: "routing.max_sessions", Field: "Server.MaxSessions", Default: strconv.Itoa(server.DefaultMaxSessions),
		Doc: "sessions remembered with their backend, least recently used evicted first"},
	{Key: "tenants.secret_env", Field: "TenantSecretEnv", Doc: "environment variable holding the tenants' HMAC secret (at least 16 characters)"},
	{Key: "tenants.api_keys", Field: "Server.Pipeline.Tenants", Doc: "API keys (at least 16 characters) mapped to tenant names; with any set, every request needs one"},
	{Key: "cors.allowed_origins", Flag: "cors-origin", Field: "Server.CORSOrigins", Cmds: Serve,
		Doc: "browser origins allowed to call the router, or * (flag repeatable)"},
	{Key: "admin.listen", Field: "AdminListen", Doc: "the operator's listener for /admin/backends (off when empty)"},
	{Key: "admin.pprof", Field: "AdminPprof", Default: "false", Doc: "serve /debug/pprof on the admin listener"},
	{Flag: "admin-listen", Field: "AdminListen", Cmds: Serve, set: setAdmin,
		Doc: "admin listener for /admin/backends and /debug/pprof (sets admin.listen and admin.pprof)"},
	{Key: "log.format", Env: "PREFIXGATE_LOG_FORMAT", Field: "LogFormat", Default: "text", Doc: "log format: text or json"},
	{Flag: "log-json", Field: "LogFormat", Default: "false", Cmds: Both, set: setLogJSON, Doc: "write logs as JSON (sets log.format)"},
	{Key: "log.level", Flag: "log-level", Env: "PREFIXGATE_LOG_LEVEL", Field: "LogLevel", Default: "info", Cmds: Both,
		Doc: "debug, info, warn or error; info logs one line per request"},
	{Key: "tracing.otlp_endpoint", Flag: "otlp-endpoint", Env: "PREFIXGATE_OTLP_ENDPOINT", Field: "Server.TraceEndpoint", Cmds: Both,
		Doc: "export OpenTelemetry traces to this OTLP/HTTP collector, e.g. http://localhost:4318"},
	{Key: "drain_timeout", Flag: "drain-timeout", Env: "PREFIXGATE_DRAIN_TIMEOUT", Field: "DrainTimeout", Default: "30s", Cmds: Both,
		Doc: "how long in-flight requests may finish after SIGTERM"},
	{Flag: "fast-http1", Field: "Server.StdlibHTTP1", Default: "true", Cmds: Serve, set: setFastHTTP1,
		Doc: "serve plain HTTP/1.1 REST requests with prefixgate's own connection loop (false: net/http serves every connection)"},
	{Key: "flow_control.enabled", Flag: "flow-control", Env: "PREFIXGATE_FLOW_CONTROL", Field: "Server.FlowControl.Enabled", Default: "true", Cmds: Both, set: setFlowControl, Reload: true,
		Doc: "queue requests by priority and fairness while the fleet is saturated, and refuse what cannot wait (docs/flow-control.md)"},
	{Key: "flow_control.objectives", Field: "Server.FlowControl.Objectives", Reload: true,
		Doc: "objective names mapped to integer priorities (higher first; negative: sheddable), chosen by the x-llm-d-inference-objective header"},
	{Key: "flow_control.tenant_objectives", Field: "Server.FlowControl.TenantObjectives", Reload: true, Doc: "fairness ids (tenants) mapped to the objective used when a request names none"},
	{Key: "flow_control.tenant_max_objectives", Field: "Server.FlowControl.TenantMaxObjectives", Reload: true, Doc: "fairness ids mapped to the highest objective they may ask for (above it, the request runs at it)"},
	{Key: "flow_control.default_objective", Field: "Server.FlowControl.DefaultObjective", Reload: true, Doc: "objective of a request that names none, for fairness ids not in tenant_objectives (empty: priority 0)"},
	{Key: "flow_control.max_objective", Field: "Server.FlowControl.MaxObjective", Reload: true, Doc: "highest objective for fairness ids not in tenant_max_objectives (empty: no ceiling)"},
	{Key: "flow_control.fairness_header", Field: "Server.FlowControl.FairnessHeader", Reload: true, Doc: "one more request header that carries the fairness id, read after the two standard ones"},
	{Key: "flow_control.ttl", Field: "Server.FlowControl.TTL", Default: durString(flowcontrol.DefaultTTL), Reload: true, Doc: "longest a request waits in the queue before 429"},
	{Key: "flow_control.band_ttls", Field: "Server.FlowControl.BandTTLs", Reload: true, Doc: "objective names mapped to their own queue TTL (durations)"},
	{Key: "flow_control.max_queued_requests", Field: "Server.FlowControl.MaxQueuedRequests", Default: strconv.Itoa(flowcontrol.DefaultBandReqs), Reload: true, Doc: "requests each priority band may hold waiting (429 above)"},
	{Key: "flow_control.max_queued_bytes", Field: "Server.FlowControl.MaxQueuedBytes", Default: strconv.Itoa(flowcontrol.DefaultBandBytes), Reload: true, Doc: "request bytes each priority band may hold waiting (429 above)"},
	{Key: "flow_control.max_flows", Field: "Server.FlowControl.MaxFlows", Default: strconv.Itoa(flowcontrol.DefaultMaxFlows), Reload: true, Doc: "fairness ids remembered per model, idle ones forgotten first"},
	{Key: "flow_control.prompt_weight", Field: "Server.FlowControl.PromptWeight", Default: ftoa(flowcontrol.DefaultPromptWght), Reload: true, Doc: "what a prompt token costs in served tokens, an output token costing 1"},
	{Key: "flow_control.max_waiting", Field: "Server.FlowControl.MaxWaiting", Default: strconv.Itoa(flowcontrol.DefaultMaxWaiting), Reload: true, Doc: "an engine reporting more waiting requests than this is full (-1: ignore the signal)"},
	{Key: "flow_control.max_kv_utilization", Field: "Server.FlowControl.MaxKVUtilization", Default: ftoa(flowcontrol.DefaultMaxKVUtil), Reload: true, Doc: "an engine whose KV cache is this full is full (above 1: ignore the signal)"},
	{Key: "flow_control.max_signal_age", Field: "Server.FlowControl.MaxSignalAge", Default: flowcontrol.DefaultMaxSignalAge.String(), Reload: true, Doc: "an engine whose scraped signals are older than this is full"},
	{Key: "flow_control.max_queued_tokens", Field: "Server.FlowControl.MaxQueuedTokens", Default: "0", Reload: true,
		Doc: "a backend on which the prefix-index policy counts this many prompt tokens queued is full (0: no bound)"},
	{Key: "flow_control.headroom_window", Field: "Server.FlowControl.HeadroomWindow", Default: flowcontrol.DefaultHeadroomWindow.String(), Reload: true, Doc: "a band that had a request this recently keeps its headroom on every backend"},
	{Key: "flow_control.headroom_fraction", Field: "Server.FlowControl.HeadroomFraction", Default: ftoa(flowcontrol.DefaultHeadroomFraction), Reload: true, Doc: "share of each backend's slots kept free for each active higher band (negative: none)"},
	{Key: "flow_control.headroom_prefill_tokens", Field: "Server.FlowControl.HeadroomPrefillTokens", Default: strconv.Itoa(flowgate.DefaultHeadroomPrefillTokens), Reload: true,
		Doc: "while a higher band is active, a backend on which the prefix-index policy counts this many prompt tokens not yet prefilled takes no request of a lower band (negative: no bound)"},
	{Key: "flow_control.short_prompt_share", Field: "Server.FlowControl.ShortPromptShare", Default: strconv.FormatFloat(flowcontrol.DefaultShortShare, 'g', -1, 64), Reload: true,
		Doc: "share of the backends (rounded down) kept free of long prompts' prefill while short prompts are active; a prompt is long from headroom_prefill_tokens tokens, a backend busy with one while the prefix-index policy counts that many tokens not yet prefilled (negative: off)"},
	{Key: "flow_control.engine_priority", Field: "Server.FlowControl.EnginePriority", Default: "false", Reload: true, Doc: "send each request's priority in its engine's own field (vLLM with --scheduling-policy priority, SGLang with --enable-priority-scheduling)"},
	{Key: "flow_control.engine_priority_field", Field: "Server.FlowControl.EnginePriorityField", Reload: true, Doc: "the body field priorities go in, for every engine (empty: each engine's own)"},
	{Key: "flow_control.metric_flows", Field: "Server.FlowControl.MetricFlows", Default: strconv.Itoa(flowgate.DefaultMetricFlows), Doc: "fairness ids with a metrics label of their own besides the configured tenants; the rest count as other (set at start, with the configured tenants' labels: a reload keeps them)"},
	{Key: "epp.listen", Flag: "listen", Field: "EPPListen", Default: ":9002", Cmds: EPP, Doc: "epp: address of the ext_proc gRPC service (and gRPC health)"},
	{Key: "epp.health_listen", Flag: "health-listen", Field: "EPPHealthListen", Default: ":9003", Cmds: EPP, Doc: "epp: address of the gRPC health service alone"},
	{Key: "epp.metrics_listen", Flag: "metrics-listen", Field: "EPPMetricsListen", Default: ":9090", Cmds: EPP, Doc: "epp: address of /metrics over HTTP, or off"},
	{Key: "kubernetes.kubeconfig", Flag: "kubeconfig", Env: "PREFIXGATE_KUBECONFIG", Field: "Kubeconfig", Cmds: Both,
		Doc: "kubeconfig file for k8s:// and inferencepool:// backends (default: the pod's service account)"},
}

// Internal lists the Settings fields no entry sets, and why.
var Internal = map[string]string{
	"Server.Pipeline.TenantSecret":   "read from the variable tenants.secret_env names",
	"Server.Pipeline.SettingName":    "set by this package from the table",
	"Server.Route.Slack":             "tuned per policy (docs/routing.md)",
	"Server.Route.VirtualNodes":      "changing it moves keys",
	"Server.Route.DisableSpillChain": "for measurement only",
	"Server.Route.DecodeWeight":      "tuned with the prefix index (docs/routing.md)",
	"Server.Route.Seed":              "for reproducible tests",
	"Server.Pool.ConnectTimeout":     "the pool's default",
	"Server.Pool.FirstByteTimeout":   "the pool's default",
	"Server.Pool.H2C":                "for benchmarks against h2c backends",
	"Server.Pool.ProbeTimeout":       "the pool's default",
	"Server.Pool.FailThreshold":      "the pool's default",
	"Server.Pool.RiseThreshold":      "the pool's default",
	"Server.Pool.EjectBackoff":       "the pool's default",
	"Server.Pool.MaxEjectBackoff":    "the pool's default",
	"Server.Pool.ScrapeInterval":     "the pool's default",
	"Server.Pool.DiscoveryInterval":  "the pool's default",
	"Server.Pool.ResolveTimeout":     "the pool's default",
	"Server.Pool.Resolver":           "for tests",
	"Server.Pool.Open":               "the command's k8s:// and inferencepool:// opener (kubernetes.kubeconfig)",
	"Server.Pool.OnState":            "the server's callback",
	"Server.Pool.OnMembership":       "the server's callback",
	"Server.Pool.OnScrape":           "the server's callback",
	"Server.Pool.ScrapeMark":         "the server's callback",
}

func setAdmin(s *Settings, v string) error {
	s.AdminListen, s.AdminPprof = v, true
	return nil
}

func setLogJSON(s *Settings, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	s.LogFormat = map[bool]string{true: "json", false: "text"}[b]
	return nil
}

func setFastHTTP1(s *Settings, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	s.Server.StdlibHTTP1 = !b
	return nil
}

func setRetrySent(s *Settings, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	s.Server.RetrySent = &b
	return nil
}

func setFlowControl(s *Settings, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	s.Server.FlowControl.Enabled = &b
	return nil
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// durString writes whole minutes as 5m rather than time's 5m0s.
func durString(d time.Duration) string {
	if d%time.Minute == 0 && d >= time.Minute {
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return d.String()
}
