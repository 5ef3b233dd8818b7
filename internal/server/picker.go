package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/sticky"
	"github.com/prefixgate/prefixgate/route"
)

// What a front door that only decides where a request goes needs from the
// server, letting another proxy move the bytes (the endpoint picker of
// package epp): the pipeline, the backend pool with its probes, the router
// and the metrics registry, all shared with serve.

// Pipeline is the request pipeline the server runs (tenant, decode,
// normalize, key, error mapping).
func (s *Server) Pipeline() *pipeline.Pipeline { return s.pipe }

// Router is the server's router; Reload changes it in place.
func (s *Server) Router() *route.Router { return s.rt() }

// RequestTimeout is the configured end-to-end limit per request, which also
// bounds a pick's wait in the queue.
func (s *Server) RequestTimeout() time.Duration { return s.cfg.RequestTimeout }

// Disaggregated reports whether some backend names a role: generation
// requests may then be split (disagg.go).
func (s *Server) Disaggregated() bool { return s.pd.active.Load() }

// PickSplit picks a request's decode worker and, when the decision splits
// it, its prefill worker, as serve's front door does. acquire picks the
// decode worker (the caller's flow control); nil picks it with the
// router's own bounded wait.
func (s *Server) PickSplit(ctx context.Context, req route.Request, acquire func(context.Context, route.Request) (route.Decision, error)) (route.SplitPick, error) {
	return s.pd.pick(ctx, s.rt(), req, acquire)
}

// RunBackground probes the backends once, then keeps probing them and
// feeding their load to the router until ctx ends: what Serve runs besides
// the HTTP listener.
func (s *Server) RunBackground(ctx context.Context) {
	s.pool.ProbeAll(ctx)
	go s.pool.Run(ctx)
}

// Gatherer is the server's Prometheus registry (pool, router, pipeline and
// normalizer series).
func (s *Server) Gatherer() prometheus.Gatherer { return s.metrics.registry }

// StoredResponses is the table of Responses ids and the backend that
// stored each (responses.max_ids): the one serve's Responses path uses.
func (s *Server) StoredResponses() *sticky.Table { return s.responses }

// Sessions is the table of sessions and the backend each one's latest
// request went to (routing.max_sessions), and the header that names a
// session (routing.session_header): the ones serve's front door uses.
func (s *Server) Sessions() (*sticky.Table, string) { return s.sessions, s.sessionHeader }
