package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// Config is everything the server needs. The zero value of every field but
// Backends takes a default (see Defaults).
type Config struct {
	// Backends are the base URLs of OpenAI-compatible replicas.
	Backends []string
	// Policy is prefix-index (the default), prefix-aware,
	// least-outstanding, random or consistent-hash.
	Policy string
	// LoadFactor is c in the bound ceil(c·(total+1)/n).
	LoadFactor float64
	// Threshold is the per-backend concurrency threshold (1..1024).
	Threshold int
	// CacheTokens is each backend's KV cache in tokens (for vLLM:
	// num_gpu_blocks × block_size); prefix-index remembers about that much
	// of what it sent to each. 0 means route.DefaultCacheTokens.
	CacheTokens int
	// PrefixLength is the routing window N (1024..65536).
	PrefixLength int
	// QueueDepth and QueueWait bound the wait when every backend is full.
	QueueDepth int
	QueueWait  time.Duration
	// MaxBodyBytes bounds the request body as received (413 above it).
	MaxBodyBytes int64
	// MaxDecodedBytes and MaxRatio bound a compressed body once decoded.
	MaxDecodedBytes int64
	MaxRatio        int
	// MaxDepth bounds JSON nesting.
	MaxDepth int
	// RequestTimeout bounds one request end to end (504 past it).
	RequestTimeout time.Duration
	// Retries is how many other backends to try when one sends nothing back.
	Retries int
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
}

// Defaults returns c with every unset field at its default.
func (c Config) Defaults() Config {
	if c.Policy == "" {
		c.Policy = route.DefaultPolicy
	}
	if c.LoadFactor == 0 {
		c.LoadFactor = 1.25
	}
	if c.Threshold == 0 {
		c.Threshold = 64
	}
	if c.PrefixLength == 0 {
		c.PrefixLength = 4096
	}
	if c.QueueDepth == 0 {
		c.QueueDepth = 256
	}
	if c.QueueWait == 0 {
		c.QueueWait = 500 * time.Millisecond
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 32 << 20
	}
	if c.MaxDecodedBytes == 0 {
		c.MaxDecodedBytes = 64 << 20
	}
	if c.MaxRatio == 0 {
		c.MaxRatio = 100
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = 128
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Minute
	}
	if c.Retries == 0 {
		c.Retries = 2
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 5 * time.Minute
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = 2 * time.Second
	}
	return c
}

// Validate reports the first invalid field by name.
func (c Config) Validate() error {
	if len(c.Backends) == 0 {
		return errors.New("backends: at least one backend URL is required")
	}
	if c.LoadFactor < 1 {
		return fmt.Errorf("load_factor: %v is below 1", c.LoadFactor)
	}
	if c.CacheTokens < 0 || c.CacheTokens > route.MaxCacheTokens {
		return fmt.Errorf("cache_tokens: %d is outside 1..%d (0 = default)", c.CacheTokens, route.MaxCacheTokens)
	}
	if c.Threshold < 1 || c.Threshold > 1024 {
		return fmt.Errorf("threshold: %d is outside 1..1024", c.Threshold)
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
	if c.Retries < 0 {
		return fmt.Errorf("retries: %d is negative", c.Retries)
	}
	return nil
}
