package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prefixgate/prefixgate/internal/config"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*s = append(*s, part)
		}
	}
	return nil
}

// serveFlags are serve's flags; each overrides the config file and the
// environment only when given.
type serveFlags struct {
	configPath   string
	listen       string
	backends     stringList
	policy       string
	loadFactor   float64
	threshold    int
	prefixLength int
	maxBody      int64
	maxString    int
	timeout      time.Duration
	clientIdle   time.Duration
	drain        time.Duration
	logJSON      bool
	certFile     string
	keyFile      string
	adminListen  string
	otlp         string
	configPoll   time.Duration
	corsOrigins  stringList
	logLevel     string
	fastHTTP1    bool
}

func runServe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	f.register(fs)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve HTTP/1.1 and h2c (or TLS) on")
	fs.StringVar(&f.certFile, "tls-cert", "", "TLS certificate file (with --tls-key: serve HTTPS and HTTP/2)")
	fs.StringVar(&f.keyFile, "tls-key", "", "TLS private key file")
	fs.StringVar(&f.adminListen, "admin-listen", "", "separate listener for /admin/backends (drain, undrain) and /debug/pprof (off when empty)")
	fs.Var(&f.corsOrigins, "cors-origin", "browser origin allowed to call the router, or * (repeatable)")
	fs.BoolVar(&f.fastHTTP1, "fast-http1", true, "serve plain HTTP/1.1 REST requests with prefixgate's own connection loop (false: net/http serves every connection)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: prefixgate serve --listen ADDR --backend URL [--backend URL ...] [flags]")
		fmt.Fprintln(fs.Output(), "\nServes Connect, gRPC and gRPC-Web (prefixgate.v1), the OpenAI-compatible")
		fmt.Fprintln(fs.Output(), "REST proxy (/v1/chat/completions, /v1/completions, /v1/models), the native")
		fmt.Fprintln(fs.Output(), "/invocations endpoint and /metrics, and routes every request by its")
		fmt.Fprintln(fs.Output(), "canonical prefix. Settings come from --config, then PREFIXGATE_* variables,")
		fmt.Fprintln(fs.Output(), "then flags given on the command line.\n\nFlags:")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prefixgate serve: unexpected argument %q\nrun 'prefixgate serve --help' for usage\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	load := func() (config.File, server.Config, error) {
		file, cfg, err := loadServeConfig(f, set)
		// Name the policy in effect, so that the start-up log shows it.
		cfg.Policy = effectivePolicy(cfg.Policy)
		cfg.StdlibHTTP1 = !f.fastHTTP1
		return file, cfg, explainSettingError(err, f, set, os.LookupEnv)
	}
	file, cfg, err := load()
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate serve: %v\n", err)
		return 2
	}
	logOut := newLogWriter(stderr)
	defer logOut.Close()
	// Messages from here on go through the same buffer, in order with the
	// log lines.
	stderr = logOut
	log := newLogger(file, logOut)
	// The router's heap is small and mostly short-lived request buffers;
	// collecting less often trades a little memory for less CPU per request
	// (docs/benchmarks.md, server overhead). GOGC in the environment wins.
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(400)
	}
	srv, err := server.New(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate serve: %v\n", explainSettingError(err, f, set, os.LookupEnv))
		return 2
	}
	ln, err := net.Listen("tcp", file.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate serve: %v\n", err)
		return 1
	}
	if file.TLS.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(file.TLS.CertFile, file.TLS.KeyFile)
		if err != nil {
			fmt.Fprintf(stderr, "prefixgate serve: tls: %v\n", err)
			return 2
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
	}
	if file.Admin.Listen != "" {
		stopAdmin, err := startAdmin(file.Admin.Listen, file.Admin.Pprof, srv.AdminHandler(), log)
		if err != nil {
			fmt.Fprintf(stderr, "serve: admin listener: %v\n", err)
			return 1
		}
		defer stopAdmin()
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	watchConfig(ctx, f, load, srv.Reload, log)
	log.Info("serving", "listen", ln.Addr().String(), "backends", len(cfg.Backends), "policy", srv.Policy(), "tls", file.TLS.CertFile != "")
	if err := srv.Serve(ctx, ln, time.Duration(file.DrainTimeout)); err != nil {
		fmt.Fprintf(stderr, "serve: %v\n", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// newLogger logs in the configured format and level.
func newLogger(file config.File, w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(file.Log.Level))
	// slog's text or JSON handler, which also writes the per-request line
	// without a slog.Record (docs/benchmarks.md, issue 13, round 5).
	return slog.New(server.NewLogHandler(w, level, file.Log.Format == "json"))
}

// register adds the flags serve shares with epp: configuration, backends,
// routing policy and limits, logging.
func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.configPath, "config", "", "YAML configuration file (see docs/configuration.md); reloaded on SIGHUP")
	fs.Var(&f.backends, "backend", "backend base URL, optionally ENGINE+URL with ENGINE auto, vllm, sglang or llamacpp (repeatable, or comma-separated)")
	// Flag defaults are the owning packages' defaults, shown by --help; a
	// flag overrides the file only when given.
	fs.StringVar(&f.policy, "policy", route.DefaultPolicy, "routing policy: prefix-index, prefix-aware, least-outstanding, random or consistent-hash")
	fs.Float64Var(&f.loadFactor, "load-factor", route.DefaultLoadFactor, "bounded-load factor c (>= 1)")
	fs.IntVar(&f.threshold, "threshold", route.DefaultThreshold, fmt.Sprintf("per-backend concurrency threshold (1..%d)", route.MaxThreshold))
	fs.IntVar(&f.prefixLength, "prefix-length", normalize.DefaultPrefixLength, fmt.Sprintf("routing window N in characters (%d..%d)", normalize.MinPrefixLength, normalize.MaxPrefixLength))
	fs.Int64Var(&f.maxBody, "max-body-bytes", server.DefaultMaxBodyBytes, "largest request body accepted (413 above)")
	fs.IntVar(&f.maxString, "max-string-bytes", server.DefaultMaxStringBytes, "largest JSON string or number literal in a body, in input bytes (400 above)")
	fs.DurationVar(&f.timeout, "request-timeout", server.DefaultRequestTimeout, "end-to-end limit per request (504 past it)")
	fs.DurationVar(&f.clientIdle, "client-idle-timeout", server.DefaultClientIdleTimeout, "close a client connection that waits this long for its next request")
	fs.DurationVar(&f.drain, "drain-timeout", 30*time.Second, "how long in-flight requests may finish after SIGTERM")
	fs.BoolVar(&f.logJSON, "log-json", false, "write logs as JSON")
	fs.DurationVar(&f.configPoll, "config-poll", 2*time.Second, "how often to check --config for changes (0: only on SIGHUP)")
	fs.StringVar(&f.otlp, "otlp-endpoint", "", "export OpenTelemetry traces to this OTLP/HTTP collector, e.g. http://localhost:4318")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error; info logs one line per request")
}

// watchConfig reloads the configuration on SIGHUP and, every
// f.configPoll, when the file's content changed, until ctx ends.
func watchConfig(ctx context.Context, f serveFlags, load func() (config.File, server.Config, error), reload func(server.Config) error, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	// The file is also watched: a change of its content reloads it, as
	// SIGHUP does. Polling needs no platform-specific watcher.
	var changed <-chan time.Time
	var stopTicker func()
	if f.configPath != "" && f.configPoll > 0 {
		t := time.NewTicker(f.configPoll)
		changed, stopTicker = t.C, t.Stop
	}
	lastContent, _ := os.ReadFile(f.configPath)
	go func() {
		defer signal.Stop(hup)
		if stopTicker != nil {
			defer stopTicker()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				// Remember what SIGHUP loaded, so that the watcher compares
				// later edits with it and not with an older version.
				if content, err := os.ReadFile(f.configPath); err == nil {
					lastContent = content
				}
			case <-changed:
				content, err := os.ReadFile(f.configPath)
				if err != nil || bytes.Equal(content, lastContent) {
					continue
				}
				lastContent = content
				log.Info("configuration file changed", "path", f.configPath)
			}
			_, next, err := load()
			if err == nil {
				err = reload(next)
			}
			if err != nil {
				log.Error("reload rejected; the running configuration stays", "err", err)
			}
		}
	}()
}

// loadServeConfig layers the config file, the environment and the flags
// that were set.
func loadServeConfig(f serveFlags, set map[string]bool) (config.File, server.Config, error) {
	var file config.File
	if f.configPath != "" {
		var err error
		if file, err = config.Load(f.configPath); err != nil {
			return file, server.Config{}, err
		}
	}
	if err := config.ApplyEnv(&file, os.LookupEnv); err != nil {
		return file, server.Config{}, err
	}
	override := func(name string, apply func()) {
		if set[name] {
			apply()
		}
	}
	override("listen", func() { file.Listen = f.listen })
	override("backend", func() { file.Backends = config.Backends(f.backends) })
	override("policy", func() { file.Routing.Policy = f.policy })
	override("load-factor", func() { file.Routing.LoadFactor = f.loadFactor })
	override("threshold", func() { file.Routing.Threshold = f.threshold })
	override("prefix-length", func() { file.Routing.PrefixLength = f.prefixLength })
	override("max-body-bytes", func() { file.Limits.MaxBodyBytes = f.maxBody })
	override("max-string-bytes", func() { file.Limits.MaxStringBytes = f.maxString })
	override("request-timeout", func() { file.Limits.RequestTimeout = config.Duration(f.timeout) })
	override("client-idle-timeout", func() { file.Limits.ClientIdleTimeout = config.Duration(f.clientIdle) })
	override("drain-timeout", func() { file.DrainTimeout = config.Duration(f.drain) })
	override("log-json", func() { file.Log.Format = map[bool]string{true: "json", false: "text"}[f.logJSON] })
	override("tls-cert", func() { file.TLS.CertFile = f.certFile })
	override("tls-key", func() { file.TLS.KeyFile = f.keyFile })
	override("cors-origin", func() { file.CORS.AllowedOrigins = f.corsOrigins })
	override("otlp-endpoint", func() { file.Tracing.OTLPEndpoint = f.otlp })
	override("log-level", func() { file.Log.Level = f.logLevel })
	override("admin-listen", func() { file.Admin.Listen, file.Admin.Pprof = f.adminListen, true })
	if file.Listen == "" {
		file.Listen = f.listen
	}
	if file.DrainTimeout == 0 {
		file.DrainTimeout = config.Duration(f.drain)
	}
	cfg, err := file.ServerConfig(os.LookupEnv)
	return file, cfg, err
}

// startAdmin serves the operator's endpoints (drain and undrain backends)
// and, with withPprof, pprof on their own listener, never on the public one.
func startAdmin(addr string, withPprof bool, admin http.Handler, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", admin)
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("admin listener", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
