package server

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/route"
)

// The server's own defaults. Routing defaults (policy, load factor,
// threshold, cache size, queue depth and wait) belong to package route,
// which applies them; the pool's (probe interval) to package backends; the
// routing window's and the body limits' to package pipeline.
const (
	DefaultRequestTimeout = 5 * time.Minute
	// DefaultClientIdleTimeout: how long a keep-alive client connection may
	// wait for its next request before the router closes it.
	DefaultClientIdleTimeout = 2 * time.Minute
	DefaultRetries           = 2
	// DefaultIdleTimeout is Pool.IdleTimeout when it is 0: the server
	// never lets a stalled backend stream hold a request forever, where
	// the pool on its own has no limit.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultResponsesMaxIDs bounds the Responses ids remembered with the
	// backend that stored them; at about 200 bytes each, 100,000 ids are
	// some 20 MiB.
	DefaultResponsesMaxIDs = 100_000
	// DefaultMaxSessions bounds the sessions remembered with their backend.
	DefaultMaxSessions = 100_000
	// DefaultMaxUploadBytes bounds a multipart upload (audio).
	DefaultMaxUploadBytes = 1 << 30
	// DefaultSessionHeader names the request header that keeps a
	// conversation on one backend.
	DefaultSessionHeader = "X-Session-Id"
)

// Config is everything the server needs. The zero value of every field but
// Backends takes a default (see Defaults). Errors of Validate start with
// the field's name (Route.LoadFactor: ...), so that a caller can say where
// the value came from.
type Config struct {
	// Backends are the base URLs of OpenAI-compatible replicas.
	Backends []string
	// Route configures the router; route.Config documents its defaults and
	// validates it.
	Route route.Config
	// Pool tunes the backend pool; backends.Options documents its
	// defaults. Its callbacks (OnState, OnMembership, OnScrape, ScrapeMark) are the
	// server's own and are replaced.
	Pool backends.Options
	// Pipeline configures what every front door does to a request before
	// it is routed: the routing window, the body limits, the tenants;
	// pipeline.Config documents its defaults and validates it.
	Pipeline pipeline.Config
	// RequestTimeout bounds one request end to end (504 past it).
	RequestTimeout time.Duration
	// ClientIdleTimeout closes a client connection that has waited this
	// long for its next request (keep-alive), so idle connections do not
	// pile up.
	ClientIdleTimeout time.Duration
	// Retries is how many other backends to try when one sends nothing
	// back: 0 tries none; nil or negative is DefaultRetries.
	Retries *int
	// RetrySent says whether a request that may have reached a backend
	// which then sent nothing back is retried on another (and so may run
	// twice); false retries only one that provably never reached it.
	// nil is true.
	RetrySent *bool
	// TraceEndpoint is an OTLP/HTTP collector base URL; empty disables
	// tracing.
	TraceEndpoint string
	// CORSOrigins are the browser origins allowed to call the router ("*"
	// for any); empty answers no CORS.
	CORSOrigins []string
	// Drain names backends (host:port, their ring names) that take no new
	// requests; those in flight finish. A backend found later by discovery
	// is drained when it appears.
	Drain []string
	// ResponsesMaxIDs bounds the stored Responses ids the router remembers
	// (least recently used evicted first); 0 is DefaultResponsesMaxIDs.
	ResponsesMaxIDs int
	// SessionHeader names the request header whose value keeps a
	// conversation on one backend while it is healthy and under its
	// bound; "" is DefaultSessionHeader.
	SessionHeader string
	// MaxSessions bounds the sessions remembered; 0 is DefaultMaxSessions.
	MaxSessions int
	// MaxUploadBytes bounds a multipart upload, streamed through (413
	// above); 0 is DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// FlowControl orders requests by priority and fairness while the fleet
	// is saturated, and refuses what cannot wait (package flowgate, which
	// documents its defaults and validates it; on by default).
	FlowControl flowgate.Config
	// StdlibHTTP1 serves every connection with net/http's server, turning
	// off the HTTP/1.1 front door's own loop for plain requests
	// (internal/h1front); for comparison and as a way out.
	StdlibHTTP1 bool
	// Disagg configures prefill/decode disaggregation (disagg_config.go).
	Disagg DisaggConfig
}

// Defaults returns c with every unset field at its default.
func (c Config) Defaults() Config {
	c.Pipeline = c.Pipeline.Defaults()
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.ClientIdleTimeout = cmp.Or(c.ClientIdleTimeout, DefaultClientIdleTimeout)
	if c.Retries == nil || *c.Retries < 0 {
		c.Retries = new(DefaultRetries)
	}
	if c.RetrySent == nil {
		c.RetrySent = new(true)
	}
	c.Pool.IdleTimeout = cmp.Or(c.Pool.IdleTimeout, DefaultIdleTimeout)
	c.ResponsesMaxIDs = cmp.Or(c.ResponsesMaxIDs, DefaultResponsesMaxIDs)
	c.MaxSessions = cmp.Or(c.MaxSessions, DefaultMaxSessions)
	c.MaxUploadBytes = cmp.Or(c.MaxUploadBytes, DefaultMaxUploadBytes)
	c.SessionHeader = cmp.Or(c.SessionHeader, DefaultSessionHeader)
	c.Disagg = c.Disagg.Defaults()
	return c
}

// Validate reports the first invalid field, its message starting with the
// field's name; route validates Route, pipeline Pipeline.
func (c Config) Validate() error {
	if len(c.Backends) == 0 {
		return errors.New("Backends: at least one backend URL is required")
	}
	if err := c.Route.Validate(); err != nil {
		return fmt.Errorf("Route.%w", err)
	}
	if err := c.Pipeline.Validate(); err != nil {
		return fmt.Errorf("Pipeline.%w", err)
	}
	if e := c.TraceEndpoint; e != "" && !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
		return fmt.Errorf("TraceEndpoint: %q is not an http:// or https:// URL", e)
	}
	for _, o := range c.CORSOrigins {
		if o != "*" && !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return fmt.Errorf("CORSOrigins: %q is not \"*\" or an http(s) origin", o)
		}
	}
	if c.ResponsesMaxIDs < 0 {
		return fmt.Errorf("ResponsesMaxIDs: %d is negative", c.ResponsesMaxIDs)
	}
	if c.MaxUploadBytes < 0 {
		return fmt.Errorf("MaxUploadBytes: %d is negative", c.MaxUploadBytes)
	}
	if c.MaxSessions < 0 {
		return fmt.Errorf("MaxSessions: %d is negative", c.MaxSessions)
	}
	if c.SessionHeader != "" && !validHeaderName(c.SessionHeader) {
		return fmt.Errorf("SessionHeader: %q is not a header name", c.SessionHeader)
	}
	if err := c.Disagg.Validate(); err != nil {
		return fmt.Errorf("Disagg.%w", err)
	}
	if err := c.FlowControl.Validate(); err != nil {
		return err
	}
	for i, name := range c.Drain {
		if name == "" || strings.ContainsAny(name, "/ ") {
			return fmt.Errorf("Drain: entry %d, %q, is not a backend name (host:port, as ListBackends shows it)", i, name)
		}
	}
	return nil
}

// BodyLimitHint says what raises the request body limit, as the end of a
// 413's message.
func (s *Server) BodyLimitHint() string { return s.pipe.Config().Raises("MaxBodyBytes") }

// namedReadLimit refuses a Connect, gRPC or gRPC-Web request whose
// declared length is over the body limit as connect does (resource
// exhausted), with a message that names the setting that raises the
// limit; connect's own check, which stays for bodies of unknown length,
// says only the sizes. The 5 bytes allow one message's envelope.
func (s *Server) namedReadLimit(path string, h http.Handler) (string, http.Handler) {
	ew := connect.NewErrorWriter()
	return path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.Pipeline.MaxBodyBytes+5 && ew.IsSupported(r) {
			msg := fmt.Sprintf("request body of %d bytes is larger than the limit of %d bytes", r.ContentLength, s.cfg.Pipeline.MaxBodyBytes)
			_ = ew.Write(w, r, connect.NewError(connect.CodeResourceExhausted, errors.New(msg+s.BodyLimitHint())))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// validHeaderName reports whether name is an HTTP field name (a token).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}
