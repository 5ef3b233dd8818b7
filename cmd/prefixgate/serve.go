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
	"syscall"
	"time"

	"github.com/prefixgate/prefixgate/internal/config"
	"github.com/prefixgate/prefixgate/internal/server"
)

// serveUsage is serve's --help.
func serveUsage(fs *flag.FlagSet) {
	fmt.Fprintln(fs.Output(), "Usage: prefixgate serve --listen ADDR --backend URL [--backend URL ...] [flags]")
	fmt.Fprintln(fs.Output(), "\nServes Connect, gRPC and gRPC-Web (prefixgate.v1), every REST path a vLLM")
	fmt.Fprintln(fs.Output(), "replica serves (chat, completions, Responses, Anthropic Messages, embeddings")
	fmt.Fprintln(fs.Output(), "and pooling, score, rerank, tokenize, audio, models, version; docs/routes.md),")
	fmt.Fprintln(fs.Output(), "the native /invocations endpoint and /metrics, and routes every request by")
	fmt.Fprintln(fs.Output(), "its canonical prefix. Settings come from --config, then PREFIXGATE_*")
	fmt.Fprintln(fs.Output(), "variables, then flags given on the command line (docs/configuration.md).\n\nFlags:")
	fs.PrintDefaults()
}

func runServe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	flags := config.RegisterFlags(fs, config.Serve)
	fs.Usage = func() { serveUsage(fs) }
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prefixgate serve: unexpected argument %q\nrun 'prefixgate serve --help' for usage\n", fs.Arg(0))
		return 2
	}
	load := func() (config.Settings, error) { return flags.Load(os.LookupEnv) }
	s, err := load()
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate serve: %v\n", err)
		return 2
	}
	logOut := newLogWriter(stderr)
	defer logOut.Close()
	// Messages from here on go through the same buffer, in order with the
	// log lines.
	stderr = logOut
	log := newLogger(s, logOut)
	collectLessOften()
	srv, err := server.New(withKubernetes(s, log).Server, log)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate serve: %v\n", err)
		return 2
	}
	ln, code := serveListener(s, stderr)
	if ln == nil {
		return code
	}
	if s.AdminListen != "" {
		stopAdmin, err := startAdmin(s.AdminListen, s.AdminPprof, srv.AdminHandler(), log)
		if err != nil {
			fmt.Fprintf(stderr, "serve: admin listener: %v\n", err)
			return 1
		}
		defer stopAdmin()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	watchConfig(ctx, s, load, srv.Reload, log)
	log.Info("serving", "listen", ln.Addr().String(), "backends", len(s.Server.Backends), "policy", srv.Policy(), "tls", s.TLSCertFile != "")
	if err := srv.Serve(ctx, ln, s.DrainTimeout); err != nil {
		fmt.Fprintf(stderr, "serve: %v\n", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// collectLessOften sets the garbage collector's target unless GOGC does:
// the router's heap is small and mostly short-lived request buffers, and
// collecting less often trades a little memory for less CPU per request
// (docs/benchmarks.md, "Overhead against HAProxy").
func collectLessOften() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(400)
	}
}

// serveListener listens on s.Listen, with TLS when s names a certificate;
// on failure it returns nil and the exit status, having said why.
func serveListener(s config.Settings, stderr io.Writer) (net.Listener, int) {
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate serve: %v\n", err)
		return nil, 1
	}
	if s.TLSCertFile == "" {
		return ln, 0
	}
	cert, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "prefixgate serve: tls: %v\n", err)
		return nil, 2
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}), 0
}

// newLogger logs in the configured format and level.
func newLogger(s config.Settings, w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(s.LogLevel))
	// slog's text or JSON handler, which also writes the per-request line
	// without a slog.Record.
	return slog.New(server.NewLogHandler(w, level, s.LogFormat == "json"))
}

// watchConfig reloads the configuration on SIGHUP and, every
// s.ConfigPoll, when the file's content changed, until ctx ends.
func watchConfig(ctx context.Context, s config.Settings, load func() (config.Settings, error), reload func(server.Config) error, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	// The file is also watched: a change of its content reloads it, as
	// SIGHUP does. Polling needs no platform-specific watcher.
	var changed <-chan time.Time
	var stopTicker func()
	if s.ConfigPath != "" && s.ConfigPoll > 0 {
		t := time.NewTicker(s.ConfigPoll)
		changed, stopTicker = t.C, t.Stop
	}
	lastContent, _ := os.ReadFile(s.ConfigPath)
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
				if content, err := os.ReadFile(s.ConfigPath); err == nil {
					lastContent = content
				}
			case <-changed:
				content, err := os.ReadFile(s.ConfigPath)
				if err != nil || bytes.Equal(content, lastContent) {
					continue
				}
				lastContent = content
				log.Info("configuration file changed", "path", s.ConfigPath)
			}
			next, err := load()
			if err == nil {
				err = reload(next.Server)
			}
			if err != nil {
				log.Error("reload rejected; the running configuration stays", "err", err)
			}
		}
	}()
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
