package server

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// The server's own defaults. Routing defaults (policy, load factor,
// threshold, queue depth and wait) belong to package route, which applies
// them; the routing window's to package normalize.
const (
	DefaultMaxBodyBytes    = 32 << 20
	DefaultMaxDecodedBytes = 64 << 20
	DefaultMaxStringBytes  = normalize.DefaultMaxStringBytes
	DefaultMaxRatio        = 100
	DefaultMaxDepth        = 128
	DefaultRequestTimeout  = 5 * time.Minute
	// DefaultClientIdleTimeout: how long a keep-alive client connection may
	// wait for its next request before the router closes it.
	DefaultClientIdleTimeout = 2 * time.Minute
	DefaultRetries           = 2
	DefaultIdleTimeout       = 5 * time.Minute
	DefaultProbeInterval     = 2 * time.Second
)

// Config is everything the server needs. The zero value of every field but
// Backends takes a default (see Defaults).
type Config struct {
	// Backends are the base URLs of OpenAI-compatible replicas.
	Backends []string
	// Policy is prefix-index, prefix-aware, least-outstanding, random or
	// consistent-hash; empty is route.DefaultPolicy (prefix-index).
	Policy string
	// LoadFactor is c in the bound ceil(c·(total+1)/n); 0 is
	// route.DefaultLoadFactor.
	LoadFactor float64
	// Threshold is the per-backend concurrency threshold (1..1024); 0 is
	// route.DefaultThreshold.
	Threshold int
	// CacheTokens is each backend's KV cache in tokens (for vLLM:
	// num_gpu_blocks × block_size); prefix-index remembers about that much
	// of what it sent to each. 0 means route.DefaultCacheTokens.
	CacheTokens int
	// PrefixLength is the routing window N (1024..65536).
	PrefixLength int
	// QueueDepth and QueueWait bound the wait when every backend is full;
	// 0 is route.DefaultQueueDepth and route.DefaultQueueWait.
	QueueDepth int
	QueueWait  time.Duration
	// MaxBodyBytes bounds the request body as received (413 above it).
	MaxBodyBytes int64
	// MaxDecodedBytes and MaxRatio bound a compressed body once decoded.
	MaxDecodedBytes int64
	MaxRatio        int
	// MaxDepth bounds JSON nesting.
	MaxDepth int
	// MaxStringBytes bounds each JSON string (and number literal) in input
	// bytes, escapes included.
	MaxStringBytes int
	// RequestTimeout bounds one request end to end (504 past it).
	RequestTimeout time.Duration
	// ClientIdleTimeout closes a client connection that has waited this
	// long for its next request (keep-alive), so idle connections do not
	// pile up.
	ClientIdleTimeout time.Duration
	// Retries is how many other backends to try when one sends nothing
	// back: 0 tries none; nil or negative is DefaultRetries.
	Retries *int
	// IdleTimeout fails a backend stream that sends nothing for this long.
	IdleTimeout time.Duration
	// ProbeInterval is how often backends' /health is probed.
	ProbeInterval time.Duration
	// TraceEndpoint is an OTLP/HTTP collector base URL; empty disables
	// tracing.
	TraceEndpoint string
	// CORSOrigins are the browser origins allowed to call the router ("*"
	// for any); empty answers no CORS.
	CORSOrigins []string
	// Tenants maps API keys to tenant names; empty disables tenants.
	Tenants map[string]string
	// TenantSecret keys the HMACs of per-tenant groups and cache_salt.
	TenantSecret []byte
	// Drain names backends (host:port, their ring names) that take no new
	// requests; those in flight finish. A backend found later by discovery
	// is drained when it appears.
	Drain []string
	// StdlibHTTP1 serves every connection with net/http's server, turning
	// off the HTTP/1.1 front door's own loop for plain requests
	// (internal/h1front); for comparison and as a way out.
	StdlibHTTP1 bool
}

// Defaults returns c with every unset field at its default.
func (c Config) Defaults() Config {
	c.PrefixLength = cmp.Or(c.PrefixLength, normalize.DefaultPrefixLength)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxDecodedBytes = cmp.Or(c.MaxDecodedBytes, DefaultMaxDecodedBytes)
	c.MaxStringBytes = cmp.Or(c.MaxStringBytes, int(min(DefaultMaxStringBytes, c.MaxDecodedBytes)))
	c.MaxRatio = cmp.Or(c.MaxRatio, DefaultMaxRatio)
	c.MaxDepth = cmp.Or(c.MaxDepth, DefaultMaxDepth)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.ClientIdleTimeout = cmp.Or(c.ClientIdleTimeout, DefaultClientIdleTimeout)
	if c.Retries == nil || *c.Retries < 0 {
		c.Retries = new(DefaultRetries)
	}
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.ProbeInterval = cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	return c
}

// Validate reports the first invalid field by name.
func (c Config) Validate() error {
	if len(c.Backends) == 0 {
		return errors.New("backends: at least one backend URL is required")
	}
	if c.LoadFactor != 0 && !(c.LoadFactor >= 1) {
		return fmt.Errorf("load_factor: %v is below 1", c.LoadFactor)
	}
	if c.CacheTokens < 0 || c.CacheTokens > route.MaxCacheTokens {
		return fmt.Errorf("cache_tokens: %d is outside 1..%d (0 = default)", c.CacheTokens, route.MaxCacheTokens)
	}
	if c.Threshold < 0 || c.Threshold > route.MaxThreshold {
		return fmt.Errorf("threshold: %d is outside 1..%d", c.Threshold, route.MaxThreshold)
	}
	if c.PrefixLength < normalize.MinPrefixLength || c.PrefixLength > normalize.MaxPrefixLength {
		return fmt.Errorf("prefix_length: %d is outside %d..%d", c.PrefixLength, normalize.MinPrefixLength, normalize.MaxPrefixLength)
	}
	if c.MaxBodyBytes < 1024 {
		return fmt.Errorf("max_body_bytes: %d is below 1024", c.MaxBodyBytes)
	}
	if len(c.Tenants) > 0 && len(c.TenantSecret) < 16 {
		return errors.New("tenants: a secret of at least 16 bytes is required")
	}
	if c.MaxStringBytes < 16 || int64(c.MaxStringBytes) > c.MaxDecodedBytes {
		return fmt.Errorf("max_string_bytes: %d is outside 16..max_decoded_bytes (%d)", c.MaxStringBytes, c.MaxDecodedBytes)
	}
	for i, name := range c.Drain {
		if name == "" || strings.ContainsAny(name, "/ ") {
			return fmt.Errorf("drain[%d]: %q is not a backend name (host:port, as ListBackends shows it)", i, name)
		}
	}
	return nil
}
