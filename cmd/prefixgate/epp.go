package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prefixgate/prefixgate/internal/config"
	"github.com/prefixgate/prefixgate/internal/epp"
	"github.com/prefixgate/prefixgate/internal/server"
)

// The Gateway API Inference Extension's default picker ports.
const (
	defaultEPPListen  = ":9002"
	defaultEPPHealth  = ":9003"
	defaultEPPMetrics = ":9090"
)

func runEPP(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("epp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	f.register(fs)
	var listen, healthListen, metricsListen string
	fs.StringVar(&listen, "listen", defaultEPPListen, "address of the ext_proc gRPC service (and gRPC health)")
	fs.StringVar(&healthListen, "health-listen", defaultEPPHealth, "address of the gRPC health service alone")
	fs.StringVar(&metricsListen, "metrics-listen", defaultEPPMetrics, "address of /metrics over HTTP, or off")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: prefixgate epp --backend http://IP:PORT [--backend ...] [flags]")
		fmt.Fprintln(fs.Output(), "\nRuns prefixgate as an endpoint picker for Envoy-based gateways: the Gateway")
		fmt.Fprintln(fs.Output(), "API Inference Extension protocol over Envoy's ext_proc gRPC API. Each request")
		fmt.Fprintln(fs.Output(), "goes through serve's pipeline (tenant, normalize, key, route) and the gateway")
		fmt.Fprintln(fs.Output(), "is told the endpoint (x-gateway-destination-endpoint: IP:PORT). Backends must")
		fmt.Fprintln(fs.Output(), "be addressed by IP. Settings come from --config (its epp section for the")
		fmt.Fprintln(fs.Output(), "ports), then PREFIXGATE_* variables, then flags. See docs/epp.md.\n\nFlags:")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "epp: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	load := func() (config.File, server.Config, error) { return loadServeConfig(f, set) }
	file, cfg, err := load()
	if err != nil {
		fmt.Fprintf(stderr, "epp: %v\n", err)
		return 2
	}
	// A flag given wins over the file, the file over the default.
	pickAddr := func(flagName, flagVal, fileVal, def string) string {
		switch {
		case set[flagName]:
			return flagVal
		case fileVal != "":
			return fileVal
		}
		return def
	}
	listen = pickAddr("listen", listen, file.EPP.Listen, defaultEPPListen)
	healthListen = pickAddr("health-listen", healthListen, file.EPP.HealthListen, defaultEPPHealth)
	metricsListen = pickAddr("metrics-listen", metricsListen, file.EPP.MetricsListen, defaultEPPMetrics)

	log := newLogger(file, stderr)
	srv, err := server.New(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "epp: %v\n", err)
		return 2
	}
	for _, st := range srv.Router().Status() {
		// Envoy's ORIGINAL_DST cluster connects to the header's value as an
		// address: a host name there fails every request.
		if _, err := netip.ParseAddrPort(st.Name); err != nil {
			log.Warn("backend is not addressed by IP:PORT; a gateway cannot connect to it from x-gateway-destination-endpoint", "backend", st.Name)
		}
	}
	var ls epp.Listeners
	closeAll := func() {
		for _, l := range []net.Listener{ls.GRPC, ls.Health, ls.Metrics} {
			if l != nil {
				l.Close()
			}
		}
	}
	addrs := []string{listen, healthListen, metricsListen}
	dsts := []*net.Listener{&ls.GRPC, &ls.Health, &ls.Metrics}
	for i, addr := range addrs {
		if i == 2 && addr == "off" {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll()
			fmt.Fprintf(stderr, "epp: %v\n", err)
			return 1
		}
		*dsts[i] = ln
	}
	metricsAddr := "off"
	if ls.Metrics != nil {
		metricsAddr = ls.Metrics.Addr().String()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	watchConfig(ctx, f, load, srv.Reload, log)
	if _, set := os.LookupEnv("GOGC"); !set {
		// As serve: fewer collections for short-lived request buffers.
		debug.SetGCPercent(400)
	}
	p := epp.New(srv, log)
	log.Info("picking endpoints", "grpc", ls.GRPC.Addr().String(), "health", ls.Health.Addr().String(),
		"metrics", metricsAddr, "backends", len(cfg.Backends), "policy", cfg.Defaults().Policy)
	if err := p.Serve(ctx, ls, time.Duration(file.DrainTimeout)); err != nil {
		fmt.Fprintf(stderr, "epp: %v\n", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
