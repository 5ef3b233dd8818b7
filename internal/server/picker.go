package server

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixgate/prefixgate/internal/bodydecode"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// This file is the server's pipeline without its forwarding, for front
// doors that only decide where a request goes and let another proxy move
// the bytes (the endpoint picker of package epp). They share prepare,
// tenants, the backend pool with its probes, and the router with serve.

// Prepared is a request after authentication, normalization and keying.
type Prepared struct {
	// Body is the canonical body: what the backend should receive.
	Body []byte
	// Info is the routing key and what it was computed from.
	Info normalize.RouteInfo
}

// RouteRequest is the router's view of the prepared request.
func (p Prepared) RouteRequest() route.Request { return routeRequest(p.Info) }

// Prepare authenticates authorization (the Authorization header's value)
// when tenants are configured, decodes raw by its Content-Encoding within
// the configured limits, then canonicalizes and keys it exactly as the REST
// front door does. Errors carry a status (see ErrorStatus).
func (s *Server) Prepare(ctx context.Context, raw []byte, encoding string, mode normalize.Mode, group, authorization string) (Prepared, error) {
	if int64(len(raw)) > s.cfg.MaxBodyBytes {
		return Prepared{}, &requestError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
			msg: "request body is larger than the limit of " + strconv.FormatInt(s.cfg.MaxBodyBytes, 10) + " bytes" + s.BodyLimitHint()}
	}
	if e := strings.TrimSpace(encoding); e != "" && !strings.EqualFold(e, "identity") {
		lim := bodydecode.Limits{MaxDecodedBytes: s.cfg.MaxDecodedBytes, MaxRatio: s.cfg.MaxRatio}
		decoded, err := bodydecode.DecodeInto(nil, encoding, bytes.NewReader(raw), lim)
		if err != nil {
			return Prepared{}, s.normalizeError(err)
		}
		raw = decoded
	}
	if len(s.cfg.Tenants) > 0 {
		tenant, err := s.tenantFor(authorization)
		if err != nil {
			return Prepared{}, err
		}
		ctx = context.WithValue(ctx, tenantKey{}, tenant)
	}
	p, err := s.prepare(ctx, raw, mode, group, 0)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{Body: p.body, Info: p.info}, nil
}

// CheckTenant is Prepare's authentication alone, for requests without an
// inference body: nil without tenants, else a 401 unless authorization
// carries a configured API key.
func (s *Server) CheckTenant(authorization string) error {
	if len(s.cfg.Tenants) == 0 {
		return nil
	}
	_, err := s.tenantFor(authorization)
	return err
}

// tenantFor maps a bearer API key to its tenant, for authenticate and
// Prepare. Every configured key is compared, in constant time each, so the
// time taken does not tell which key matched.
func (s *Server) tenantFor(authorization string) (string, error) {
	key, ok := strings.CutPrefix(authorization, "Bearer ")
	tenant := ""
	for k, t := range s.cfg.Tenants {
		if ok && subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			tenant = t
		}
	}
	if tenant == "" {
		return "", &requestError{status: http.StatusUnauthorized, code: "invalid_api_key",
			msg: "an API key is required: send Authorization: Bearer KEY with a key from the tenants configuration"}
	}
	return tenant, nil
}

// MaxBodyBytes is the largest request body accepted as received.
func (s *Server) MaxBodyBytes() int64 { return s.cfg.MaxBodyBytes }

// TenantsEnabled reports whether requests must carry a tenant API key (the
// key is then prefixgate's, not the backend's, and is not forwarded).
func (s *Server) TenantsEnabled() bool { return len(s.cfg.Tenants) > 0 }

// Router is the server's router; Reload changes it in place.
func (s *Server) Router() *route.Router { return s.rt() }

// RequestTimeout is the configured end-to-end limit per request, which also
// bounds a pick's wait in the queue.
func (s *Server) RequestTimeout() time.Duration { return s.cfg.RequestTimeout }

// RunBackground probes the backends once, then keeps probing them and
// feeding their load to the router until ctx ends: what Serve runs besides
// the HTTP listener.
func (s *Server) RunBackground(ctx context.Context) {
	s.pool.ProbeAll(ctx)
	go s.pool.Run(ctx)
}

// Gatherer is the server's Prometheus registry (pool, router and normalizer
// series).
func (s *Server) Gatherer() prometheus.Gatherer { return s.metrics.registry }

// ObserveDecision records a routing decision's time (and queue wait) in the
// same series the REST front door uses.
func (s *Server) ObserveDecision(took time.Duration, d *route.Decision) {
	s.metrics.decisionSeconds.Observe(took.Seconds())
	if d != nil && d.Queued > 0 {
		s.metrics.queueSeconds.Observe(d.Queued.Seconds())
	}
	if d != nil && (d.Reason == route.ReasonSpill || d.Reason == route.ReasonSpillChain) {
		s.metrics.spills.Inc()
	}
}

// PickError maps a routing failure for a request for model to the error a
// client should see (429 with Retry-After when saturated, 404 for a model no
// backend lists, 503 with no healthy candidate).
func (s *Server) PickError(err error, model string) error { return s.pickError(err, model) }

// ErrorStatus returns the HTTP status, OpenAI error code, message and
// Retry-After of an error from Prepare or PickError; any other error is a
// 500.
func ErrorStatus(err error) (status int, code, msg string, retryAfter time.Duration) {
	re := asRequestError(err)
	return re.status, re.code, re.msg, re.retryAfter
}

// NewRequestError is an error with the status and code a client should see,
// for the picker's own refusals (a subset with no eligible endpoint).
func NewRequestError(status int, code, msg string) error {
	if status < 400 || status > 599 {
		return errors.New(msg)
	}
	return &requestError{status: status, code: code, msg: msg}
}
