package server

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// Server is the router: one http.Handler for every protocol it speaks.
type Server struct {
	cfg     Config
	log     *slog.Logger
	pool    *backends.Pool
	router  atomic.Pointer[route.Router]
	metrics *metrics
	health  *grpchealth.StaticChecker
	tracing tracing
	ready   atomic.Bool
	handler http.Handler

	// readyMu serializes updateReadiness, so that the last health change
	// decides what the health service says.
	readyMu sync.Mutex
	// drainMu guards drained (the backends the configuration drains) and
	// seen (the backends that have a health series).
	drainMu sync.Mutex
	drained map[string]bool
	seen    map[string]bool

	// reloadMu serializes Reload; routing is the routing part of the
	// configuration last applied, as given (before route's defaults).
	reloadMu sync.Mutex
	routing  route.Config

	// engines is the engine label last published per backend (usage.go).
	enginesMu sync.Mutex
	engines   map[string]string
	// mispredictionsBefore counts the prefix index's mispredictions of
	// routers replaced by Reload, so the counter never goes back.
	mispredictionsBefore atomic.Uint64
}

// New builds a server from cfg (after Defaults and Validate).
func New(cfg Config, log *slog.Logger) (*Server, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, log: log, metrics: newMetrics(), routing: routerConfig(cfg),
		drained: map[string]bool{}, seen: map[string]bool{}}
	s.metrics.registerIndex(s)
	tr, err := newTracing(cfg.TraceEndpoint)
	if err != nil {
		return nil, err
	}
	s.tracing = tr
	pool, err := backends.NewPool(cfg.Backends, backends.Options{
		ProbeInterval: cfg.ProbeInterval,
		IdleTimeout:   cfg.IdleTimeout,
		OnState:       s.onState,
		OnMembership:  s.onMembership,
	})
	if err != nil {
		return nil, err
	}
	s.pool = pool
	members := s.members()
	router, err := route.New(routerConfig(cfg), members)
	if err != nil {
		return nil, err
	}
	s.router.Store(router)
	s.handler = s.observe(s.cors(s.authenticate(s.routes())))
	s.ready.Store(true)
	// Every backend has a health series from the start, not only after
	// its first change.
	s.followMembership(pool.Backends())
	s.applyDrain(cfg.Drain)
	s.updateReadiness()
	return s, nil
}

func (s *Server) members() []route.Member {
	bs := s.pool.Backends()
	out := make([]route.Member, 0, len(bs))
	for _, b := range bs {
		out = append(out, route.Member{Name: b.Name, Models: b.Models(), CacheTokens: b.CacheTokens()})
	}
	return out
}

// routeHealth maps a pool state to the router's: ejected and draining
// backends leave the candidate set but stay on the ring, so their keys come
// home when they return.
func routeHealth(st backends.State) route.Health {
	switch st {
	case backends.StateEjected:
		return route.HealthEjected
	case backends.StateDraining:
		return route.HealthDraining
	}
	return route.HealthHealthy
}

// onState follows a backend's health into the router and metrics.
func (s *Server) onState(name string, st backends.State) {
	s.log.Info("backend state changed", "backend", name, "state", st.String())
	s.metrics.setHealthy(name, st)
	if r := s.router.Load(); r != nil {
		r.SetHealth(name, routeHealth(st))
	}
	s.updateReadiness()
}

// onMembership follows discovery (DNS, SRV, watched files) and model lists
// into the router's ring.
func (s *Server) onMembership(bs []*backends.Backend) {
	r := s.router.Load()
	if r == nil {
		return // New builds the router from s.members() after NewPool.
	}
	ms := make([]route.Member, 0, len(bs))
	for _, b := range bs {
		ms = append(ms, route.Member{Name: b.Name, Models: b.Models(), CacheTokens: b.CacheTokens()})
	}
	if err := r.SetMembers(ms); err != nil {
		s.log.Error("backend membership", "err", err)
		return
	}
	for _, b := range bs {
		if st := b.State(); st != backends.StateHealthy {
			r.SetHealth(b.Name, routeHealth(st))
		}
	}
	s.followMembership(bs)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// The same body limit as REST, for Connect, gRPC and gRPC-Web messages.
	opts := append(compressionOptions(), connect.WithReadMaxBytes(int(s.cfg.MaxBodyBytes)))
	mux.Handle(prefixgatev1connect.NewInferenceServiceHandler(inferenceService{s}, opts...))
	mux.Handle(prefixgatev1connect.NewNormalizeServiceHandler(normalizeService{s}, opts...))
	mux.Handle(prefixgatev1connect.NewAdminServiceHandler(adminService{s}, opts...))
	services := []string{
		prefixgatev1connect.InferenceServiceName,
		prefixgatev1connect.NormalizeServiceName,
		prefixgatev1connect.AdminServiceName,
	}
	s.health = grpchealth.NewStaticChecker(services...)
	mux.Handle(grpchealth.NewHandler(s.health))
	// The health service is listed too, as grpc-go servers list it, so that
	// grpcurl list shows it.
	reflector := grpcreflect.NewStaticReflector(append(services, grpchealth.HealthV1ServiceName)...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))

	mux.Handle("/v1/chat/completions", s.handleProxy("chat_completions", normalize.ModeChat, "/v1/chat/completions"))
	mux.Handle("/v1/completions", s.handleProxy("completions", normalize.ModeCompletion, "/v1/completions"))
	mux.Handle("/invocations", s.handleProxy("invocations", normalize.ModeNative, "/invocations"))
	mux.HandleFunc("/v1/explain", s.handleExplain)
	mux.HandleFunc("/v1/models", s.handleModels)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		if !s.fleetUp() {
			http.Error(w, "no healthy backend", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	// Anything else is an OpenAI-shaped 404, so that OpenAI clients with a
	// wrong base URL get an error they can show.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &requestError{status: http.StatusNotFound, code: "unknown_url",
			msg: fmt.Sprintf("unknown path %.200q; prefixgate serves POST /v1/chat/completions, /v1/completions, /invocations and /v1/explain, GET /v1/models", r.URL.Path)})
	})
	return mux
}

// fleetUp reports whether any backend is in the candidate set.
func (s *Server) fleetUp() bool {
	for _, b := range s.pool.Backends() {
		if b.Healthy() {
			return true
		}
	}
	return false
}

// updateReadiness makes gRPC health follow the fleet: the whole server and
// InferenceService are NOT_SERVING while draining or while no backend is
// healthy; NormalizeService and AdminService need no backend and always
// serve.
func (s *Server) updateReadiness() {
	if s.health == nil {
		return // called from a pool callback before routes were built
	}
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	st := grpchealth.StatusServing
	if !s.ready.Load() || !s.fleetUp() {
		st = grpchealth.StatusNotServing
	}
	for _, name := range []string{"", prefixgatev1connect.InferenceServiceName} {
		s.health.SetStatus(name, st)
	}
}

// rt is the current router; Reload may swap it.
func (s *Server) rt() *route.Router { return s.router.Load() }

// routerConfig is the router's part of cfg.
func routerConfig(cfg Config) route.Config {
	return route.Config{
		Policy:           cfg.Policy,
		LoadFactor:       cfg.LoadFactor,
		DefaultThreshold: cfg.Threshold,
		QueueDepth:       cfg.QueueDepth,
		QueueWait:        cfg.QueueWait,
		// DefaultCacheTokens 0 is route's default.
		DefaultCacheTokens: cfg.CacheTokens,
	}
}

// Reload applies a new configuration without dropping requests: backends
// are added and removed in place (those that stay keep their in-flight
// counts and health), and a change of routing policy or bounds swaps in a
// new router. Requests in flight finish on the backend they were sent to;
// after a router swap their slots are released against the old router, so
// the new one briefly under-counts them (it starts from zero in flight).
// Listen address, limits and tenants apply at restart only.
func (s *Server) Reload(next Config) error {
	next = next.Defaults()
	if err := next.Validate(); err != nil {
		return err
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if err := s.pool.SetBackends(next.Backends); err != nil {
		return err
	}
	s.applyDrain(next.Drain)
	members := s.members()
	// Compare settings as given, not with route's defaults filled in, so
	// that an unchanged file never swaps the router.
	if want := routerConfig(next); want != s.routing {
		r, err := route.New(want, members)
		if err != nil {
			return err
		}
		for _, b := range s.pool.Backends() {
			if !b.Healthy() {
				r.SetHealth(b.Name, route.HealthEjected)
			}
		}
		if st, ok := s.rt().IndexStats(); ok {
			s.mispredictionsBefore.Add(st.Mispredictions)
		}
		s.router.Store(r)
		s.routing = want
		s.onMembership(s.pool.Backends())
	} else if err := s.rt().SetMembers(members); err != nil {
		return err
	}
	s.log.Info("configuration reloaded", "backends", len(next.Backends), "policy", s.rt().Config().Policy)
	return nil
}

// Policy is the routing policy in force, defaults applied.
func (s *Server) Policy() string { return s.rt().Config().Policy }

// Handler returns the server's handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves HTTP/1.1 and h2c on ln until ctx ends, then stops accepting,
// reports not ready, lets in-flight requests and streams finish for up to
// drain, and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	probeCtx, stopProbes := context.WithCancel(context.Background())
	defer stopProbes()
	// Probe once before accepting, so that health and each backend's models
	// are known from the first request on (bounded by the probe timeout).
	s.pool.ProbeAll(ctx)
	go s.pool.Run(probeCtx)
	go s.publishInFlight(probeCtx)

	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	protocols.SetHTTP2(true)
	srv := &http.Server{
		Handler:           s.handler,
		Protocols:         protocols,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.ready.Store(false)
	s.updateReadiness()
	s.log.Info("draining", "timeout", drain)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("drain did not finish within %s: %w", drain, err)
	}
	if err := s.tracing.shutdown(shutdownCtx); err != nil {
		s.log.Warn("flushing traces", "err", err)
	}
	return nil
}

// publishInFlight copies the router's in-flight counts into metrics and
// feeds each backend's scraped load (vLLM's running + waiting requests) to
// the router as a hint, so that several routers in front of one fleet bound
// the fleet's load rather than each its own share. A stale or unknown
// signal clears the hint.
func (s *Server) publishInFlight(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r := s.rt()
			for _, st := range r.Status() {
				s.metrics.inFlight.WithLabelValues(st.Name).Set(float64(st.InFlight))
			}
			for _, b := range s.pool.Backends() {
				s.publishEngine(b)
				l := b.Load()
				if l.Known && l.Err == nil && time.Since(l.ScrapedAt) <= loadHintMaxAge {
					r.SetLoadHint(b.Name, int(math.Round(l.Running+l.Waiting)))
				} else {
					r.SetLoadHint(b.Name, -1)
				}
			}
		}
	}
}

// loadHintMaxAge is how old a scrape may be and still steer routing: two
// scrape intervals at the pool's default of 2s.
const loadHintMaxAge = 4 * time.Second
