package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/prefixgate/prefixgate/internal/config"
	"github.com/prefixgate/prefixgate/internal/epp"
	"github.com/prefixgate/prefixgate/internal/server"
)

// eppUsage is epp's --help.
func eppUsage(fs *flag.FlagSet) {
	fmt.Fprintln(fs.Output(), "Usage: prefixgate epp --backend http://IP:PORT [--backend ...] [flags]")
	fmt.Fprintln(fs.Output(), "\nRuns prefixgate as an endpoint picker for Envoy-based gateways: the Gateway")
	fmt.Fprintln(fs.Output(), "API Inference Extension protocol over Envoy's ext_proc gRPC API. Each request")
	fmt.Fprintln(fs.Output(), "goes through serve's pipeline (tenant, normalize, key, route) and the gateway")
	fmt.Fprintln(fs.Output(), "is told the endpoint (x-gateway-destination-endpoint: IP:PORT). Backends must")
	fmt.Fprintln(fs.Output(), "be addressed by IP. Settings come from --config (its epp section for the")
	fmt.Fprintln(fs.Output(), "ports), then PREFIXGATE_* variables, then flags. See docs/epp.md.\n\nFlags:")
	fs.PrintDefaults()
}

func runEPP(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("epp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	flags := config.RegisterFlags(fs, config.EPP)
	fs.Usage = func() { eppUsage(fs) }
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "epp: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	load := func() (config.Settings, error) { return flags.Load(os.LookupEnv) }
	s, err := load()
	if err != nil {
		fmt.Fprintf(stderr, "epp: %v\n", err)
		return 2
	}
	log := newLogger(s, stderr)
	srv, err := server.New(withKubernetes(s, log).Server, log)
	if err != nil {
		fmt.Fprintf(stderr, "epp: %v\n", err)
		return 2
	}
	warnHostNames(srv, log)
	ls, err := eppListeners(s)
	if err != nil {
		fmt.Fprintf(stderr, "epp: %v\n", err)
		return 1
	}
	metricsAddr := "off"
	if ls.Metrics != nil {
		metricsAddr = ls.Metrics.Addr().String()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	watchConfig(ctx, s, load, srv.Reload, log)
	collectLessOften()
	p := epp.New(srv, log)
	log.Info("picking endpoints", "grpc", ls.GRPC.Addr().String(), "health", ls.Health.Addr().String(),
		"metrics", metricsAddr, "backends", len(s.Server.Backends), "policy", srv.Policy())
	if err := p.Serve(ctx, ls, s.DrainTimeout); err != nil {
		fmt.Fprintf(stderr, "epp: %v\n", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// warnHostNames warns of backends not addressed by IP:PORT: Envoy's
// ORIGINAL_DST cluster connects to the header's value as an address, and a
// host name there fails every request.
func warnHostNames(srv *server.Server, log *slog.Logger) {
	for _, st := range srv.Router().Status() {
		if _, err := netip.ParseAddrPort(st.Name); err != nil {
			log.Warn("backend is not addressed by IP:PORT; a gateway cannot connect to it from x-gateway-destination-endpoint", "backend", st.Name)
		}
	}
}

// eppListeners listens on the picker's three addresses; metrics "off"
// leaves its listener nil.
func eppListeners(s config.Settings) (epp.Listeners, error) {
	var ls epp.Listeners
	addrs := []string{s.EPPListen, s.EPPHealthListen, s.EPPMetricsListen}
	dsts := []*net.Listener{&ls.GRPC, &ls.Health, &ls.Metrics}
	for i, addr := range addrs {
		if i == 2 && addr == "off" {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range []net.Listener{ls.GRPC, ls.Health, ls.Metrics} {
				if l != nil {
					l.Close()
				}
			}
			return ls, err
		}
		*dsts[i] = ln
	}
	return ls, nil
}
