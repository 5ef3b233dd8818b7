package server

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/h1front"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/internal/sticky"
	"github.com/prefixgate/prefixgate/route"
)

// The routing group's request header and the response headers that say
// where a request went, as the pipeline names them.
const (
	GroupHeader    = pipeline.GroupHeader
	BackendHeader  = pipeline.BackendHeader
	DecisionHeader = pipeline.DecisionHeader
	KeyHeader      = pipeline.KeyHeader
)

// Server is the router: one http.Handler for every protocol it speaks.
type Server struct {
	cfg  Config
	log  *slog.Logger
	pool *backends.Pool
	// router picks over the pool's backends; it is built once and changed
	// in place (SetTargets, Reconfigure), so in-flight counts survive
	// reloads.
	router *route.Router
	// pd is the prefill side of a fleet with roles (disagg.go).
	pd *disagg
	// pipe runs every request through tenant, decode, normalize and key
	// for router.
	pipe    *pipeline.Pipeline
	metrics *metrics
	health  *grpchealth.StaticChecker
	tracing tracing
	ready   atomic.Bool
	handler http.Handler

	// readyMu serializes updateReadiness, so that the last health change
	// decides what the health service says.
	readyMu sync.Mutex

	// reloadMu serializes Reload.
	reloadMu sync.Mutex

	// responses is which backend stored each Responses id (responses.go);
	// sessions which backend each session's requests go to, under the
	// request header sessionHeader.
	responses, sessions *sticky.Table
	sessionHeader       string

	// gate is flow control in front of the router (flowcontrol.go).
	gate *flowgate.Gate

	// engines is the engine label last published per backend (usage.go).
	enginesMu sync.Mutex
	engines   map[string]string
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
	s := &Server{cfg: cfg, log: log, metrics: newMetrics(),
		responses: sticky.New(cfg.ResponsesMaxIDs), sessions: sticky.New(cfg.MaxSessions),
		sessionHeader: http.CanonicalHeaderKey(cfg.SessionHeader)}
	s.metrics.registerRouter(s)
	tr, err := newTracing(cfg.TraceEndpoint)
	if err != nil {
		return nil, err
	}
	s.tracing = tr
	opts := cfg.Pool
	opts.OnState, opts.OnMembership, opts.OnScrape, opts.ScrapeMark = s.onState, s.onMembership, s.onScrape, s.scrapeMark
	pool, err := backends.NewPool(cfg.Backends, opts)
	if err != nil {
		return nil, err
	}
	s.pool = pool
	router, err := route.NewTargets(cfg.Route, decodeTargets(pool.Backends()))
	if err != nil {
		return nil, err
	}
	s.router = router
	if s.pd, err = newDisagg(s, pool.Backends()); err != nil {
		return nil, err
	}
	s.pipe, err = pipeline.New(cfg.Pipeline, router)
	if err != nil {
		return nil, err
	}
	s.metrics.registry.MustRegister(s.pipe.Collectors()...)
	if s.gate, err = flowgate.New(cfg.FlowControl, router, backendSignals, log, s.metrics.registry); err != nil {
		return nil, err
	}
	s.gate.SetRescrape(s.rescrape)
	s.handler = s.observe(s.cors(s.authenticate(s.routes())))
	s.ready.Store(true)
	s.applyDrain(cfg.Drain)
	s.updateReadiness()
	return s, nil
}

// A backend judges its own passive health from each pick's outcome, which
// the router hands it (route.Observer): ejection has one owner, the pool.
var _ route.Observer = (*backends.Backend)(nil)

// targets is the pool's backends as the router's members: the router
// reads name, models, health and cache size from the backends themselves.
func targets(bs []*backends.Backend) []route.Target {
	ts := make([]route.Target, len(bs))
	for i, b := range bs {
		ts[i] = b
	}
	return ts
}

// onState follows a backend's health change: the router recounts its
// candidates (it reads health from the backend) and readiness follows. The
// pool calls it without the backend's lock.
func (s *Server) onState(b *backends.Backend, st backends.State) {
	if st == backends.StateEjected {
		h := b.Health()
		s.log.Warn("backend ejected", "backend", b.Name, "address", b.URL.Redacted(), "cause", h.LastError)
	} else {
		s.log.Info("backend state changed", "backend", b.Name, "address", b.URL.Redacted(), "state", st.String())
	}
	if s.router != nil {
		s.router.Refresh()
	}
	if s.pd != nil {
		s.pd.prefill.Refresh()
	}
	s.updateReadiness()
}

// onMembership hands the pool's new backend list (discovery, SetBackends,
// model lists, cache sizes) to the router.
func (s *Server) onMembership(bs []*backends.Backend) {
	if s.router == nil {
		return // New builds the router from the pool's list after NewPool.
	}
	if err := s.router.SetTargets(decodeTargets(bs)); err != nil {
		s.log.Error("backend membership", "err", err)
		return
	}
	if s.pd != nil {
		if err := s.pd.setMembers(bs); err != nil {
			s.log.Error("prefill membership", "err", err)
		}
	}
	s.updateReadiness()
}

// completions is what both routers had finished on a backend just before
// its load was scraped (backends.Options.ScrapeMark): the hint leaves out
// requests that ended between the scrape and onScrape.
type completions struct{ main, prefill int64 }

func (s *Server) scrapeMark(b *backends.Backend) any {
	if s.router == nil {
		return nil
	}
	return completions{main: s.router.Completed(b.Name), prefill: s.pd.prefill.Completed(b.Name)}
}

// onScrape follows a round of load scrapes: each backend's engine label,
// and its scraped load (vLLM's running + waiting requests) as the router's
// hint, so that several routers in front of one fleet bound the fleet's
// load rather than each its own share. A stale or unknown signal clears
// the hint.
func (s *Server) onScrape() {
	if s.router == nil {
		return
	}
	for _, b := range s.pool.Backends() {
		s.publishEngine(b)
		l := b.Load()
		if l.Known && l.Err == nil && time.Since(l.ScrapedAt) <= loadHintMaxAge {
			m, ok := l.Mark.(completions)
			if !ok {
				m = completions{main: -1, prefill: -1}
			}
			load := int(math.Round(l.Running + l.Waiting))
			s.router.SetLoadHintSince(b.Name, load, m.main)
			s.pd.prefill.SetLoadHintSince(b.Name, load, m.prefill)
		} else {
			s.router.SetLoadHint(b.Name, -1)
			s.pd.prefill.SetLoadHint(b.Name, -1)
		}
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// The same body limit as REST, for Connect, gRPC and gRPC-Web messages.
	opts := append(compressionOptions(), connect.WithReadMaxBytes(int(s.cfg.Pipeline.MaxBodyBytes)))
	mux.Handle(s.namedReadLimit(prefixgatev1connect.NewInferenceServiceHandler(inferenceService{s}, opts...)))
	mux.Handle(s.namedReadLimit(prefixgatev1connect.NewNormalizeServiceHandler(normalizeService{s}, opts...)))
	mux.Handle(s.namedReadLimit(prefixgatev1connect.NewAdminServiceHandler(adminService{s}, opts...)))
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

	for i := range routes.Len() {
		rt := routes.At(i)
		mux.Handle(rt.Path, s.routeHandler(rt))
	}
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
		s.record(routes.Other, nil, http.StatusNotFound)
		writeError(w, &pipeline.Error{Status: http.StatusNotFound, Code: "unknown_url",
			Message: fmt.Sprintf("unknown path %.200q; prefixgate serves %s", r.URL.Path, routes.List())})
	})
	return newPlainRoutes(mux)
}

// plainRoutes serves mux, with the handlers of the plain paths the
// front door serves (h1front.PlainPaths) found once, for GET and POST, when it is
// made: the mux's search (cleaning the path, walking its tree, joining
// patterns) was 2% of the router's CPU per request. A table lookup is
// the mux's own answer, since no pattern names a host, these paths are
// clean, and the patterns on them have no wildcards.
type plainRoutes struct {
	mux      *http.ServeMux
	handlers [2][len(h1front.PlainPaths)]http.Handler // [0]: GET, [1]: POST
	patterns [2][len(h1front.PlainPaths)]string
}

func newPlainRoutes(mux *http.ServeMux) *plainRoutes {
	pr := &plainRoutes{mux: mux}
	for m, method := range [2]string{http.MethodGet, http.MethodPost} {
		for i, path := range h1front.PlainPaths {
			pr.handlers[m][i], pr.patterns[m][i] = mux.Handler(&http.Request{Method: method, URL: &url.URL{Path: path}})
		}
	}
	return pr
}

func (pr *plainRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := -1
	switch r.Method {
	case http.MethodGet:
		m = 0
	case http.MethodPost:
		m = 1
	}
	if m >= 0 && r.URL.RawPath == "" && r.RequestURI != "*" {
		for i, path := range h1front.PlainPaths {
			if r.URL.Path == path {
				r.Pattern = pr.patterns[m][i]
				pr.handlers[m][i].ServeHTTP(w, r)
				return
			}
		}
	}
	pr.mux.ServeHTTP(w, r)
}

// fleetUp reports whether any backend that takes whole requests (any,
// but a prefill worker of a disaggregated fleet) is in the candidate set.
func (s *Server) fleetUp() bool {
	return slices.ContainsFunc(s.pool.Backends(), func(b *backends.Backend) bool { return b.Healthy() && b.Role().Decodes() })
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

// rt is the router.
func (s *Server) rt() *route.Router { return s.router }

// Reload applies a new configuration without dropping requests: backends
// are added and removed in place (those that stay keep their state), the
// routing settings change in place (route.Router.Reconfigure), so the
// in-flight counts of requests picked before the reload stay exact, and
// so do the flow_control settings (flowgate.Gate.Reconfigure: requests
// queued in flow control stay queued and are served). Requests in flight
// finish on the backend they were sent to. Listen address, limits,
// tenants and flow_control.metric_flows apply at restart only.
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
	if err := s.router.Reconfigure(next.Route); err != nil {
		return err
	}
	if err := s.pd.prefill.Reconfigure(next.Route); err != nil {
		return err
	}
	if err := s.gate.Reconfigure(next.FlowControl); err != nil {
		return err
	}
	s.log.Info("configuration reloaded", "backends", len(next.Backends), "policy", s.rt().Config().Policy,
		"flow_control", s.gate.Enabled())
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

	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	protocols.SetHTTP2(true)
	srv := s.httpServer(protocols)
	// Connections that spoke HTTP/1.1 with the front door first go to a
	// server that speaks nothing else (h1front.Front.Continued).
	http1 := new(http.Protocols)
	http1.SetHTTP1(true)
	continued := s.httpServer(http1)
	errc := make(chan error, 2)
	var front *h1front.Front
	accepted := make(chan error, 1)
	if s.cfg.StdlibHTTP1 {
		go func() { errc <- srv.Serve(ln) }()
	} else {
		// The front door accepts; net/http serves what it hands over.
		front = h1front.New(ln, s.frontConfig())
		go func() { errc <- srv.Serve(front) }()
		go func() { errc <- continued.Serve(front.Continued()) }()
		go func() { accepted <- front.Run() }()
	}
	select {
	case err := <-errc:
		if front != nil {
			_ = front.Close()
			_ = srv.Close()
			_ = continued.Close()
		}
		return err
	case err := <-accepted:
		_ = srv.Close()
		_ = continued.Close()
		return err
	case <-ctx.Done():
	}
	s.ready.Store(false)
	s.updateReadiness()
	s.log.Info("draining", "timeout", drain)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if front != nil {
		front.Shutdown()
	}
	cerrc := make(chan error, 1)
	go func() { cerrc <- continued.Shutdown(shutdownCtx) }()
	err := srv.Shutdown(shutdownCtx)
	if cerr := <-cerrc; err == nil {
		err = cerr
	}
	if front != nil {
		_ = front.Close()
		<-accepted // no connection starts after this
		if ferr := front.Wait(shutdownCtx); err == nil {
			err = ferr
		}
	}
	if err != nil {
		return fmt.Errorf("drain did not finish within %s: %w", drain, err)
	}
	if err := s.tracing.shutdown(shutdownCtx); err != nil {
		s.log.Warn("flushing traces", "err", err)
	}
	return nil
}

// httpServer is the net/http server of Serve, speaking protocols.
func (s *Server) httpServer(protocols *http.Protocols) *http.Server {
	return &http.Server{
		Handler:           s.handler,
		Protocols:         protocols,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       s.cfg.ClientIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// frontConfig is the HTTP/1.1 front door's configuration, shared with
// the net/http server it hands connections to.
func (s *Server) frontConfig() h1front.Config {
	return h1front.Config{
		Handler: s.handler, Log: s.log, HeaderTimeout: headerTimeout,
		ClientIdleTimeout: s.cfg.ClientIdleTimeout, MaxBodyBytes: s.cfg.Pipeline.MaxBodyBytes,
		Requests: s.metrics.frontRequests, Handovers: s.metrics.handovers,
	}
}

// headerTimeout bounds the wait for a request's head once it has begun
// (and for a new connection's first), against slow-header clients. A
// variable for the tests only.
var headerTimeout = 10 * time.Second

// loadHintMaxAge is how old a scrape may be and still steer routing: two
// scrape intervals at the pool's default of 2s.
const loadHintMaxAge = 4 * time.Second
