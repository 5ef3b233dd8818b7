package epp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// HealthServices are the gRPC health service names the picker answers, as
// a GIE deployment probes them: the whole server (""), liveness, readiness
// and the ext_proc service itself.
var HealthServices = []string{"", "liveness", "readiness", extprocv3.ExternalProcessor_ServiceDesc.ServiceName}

// Listeners are the picker's three ports.
type Listeners struct {
	// GRPC serves ext_proc (and health, for a gateway's cluster health
	// check on the same port).
	GRPC net.Listener
	// Health serves gRPC health alone (a GIE deployment's 9003).
	Health net.Listener
	// Metrics serves /metrics over HTTP; nil disables it.
	Metrics net.Listener
}

// Serve runs the picker until ctx ends; then it reports not serving, lets
// streams in flight finish for up to drain, and returns. It starts the
// server's background work (backend probes) and is ready once every backend
// was probed once.
func (p *Picker) Serve(ctx context.Context, ls Listeners, drain time.Duration) error {
	hs := health.NewServer()
	for _, name := range HealthServices {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	hs.SetServingStatus("liveness", healthpb.HealthCheckResponse_SERVING)
	g := grpc.NewServer(grpc.MaxRecvMsgSize(int(p.pipe.Config().MaxBodyBytes) + (1 << 20)))
	p.Register(g)
	healthpb.RegisterHealthServer(g, hs)
	hg := grpc.NewServer()
	healthpb.RegisterHealthServer(hg, hs)

	errc := make(chan error, 3)
	// Health answers from the start (liveness serving, the rest not yet).
	go func() { errc <- hg.Serve(ls.Health) }()
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	// Probe every backend once before serving ext_proc and reporting
	// ready, so the first requests see health and model lists.
	p.fleet.RunBackground(bg)
	for _, name := range HealthServices {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	go func() { errc <- g.Serve(ls.GRPC) }()
	var ms *http.Server
	if ls.Metrics != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{p.fleet.Gatherer(), p.Gatherer()}, promhttp.HandlerOpts{}))
		ms = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := ms.Serve(ls.Metrics); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	var err error
	select {
	case err = <-errc:
		err = fmt.Errorf("epp: serving: %w", err)
	case <-ctx.Done():
	}
	for _, name := range HealthServices {
		if name != "liveness" {
			hs.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
		}
	}
	p.log.Info("draining", "timeout", drain)
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(drain):
		g.Stop()
		if err == nil {
			err = fmt.Errorf("epp: drain did not finish within %s", drain)
		}
	}
	hg.Stop()
	if ms != nil {
		_ = ms.Close()
	}
	return err
}
