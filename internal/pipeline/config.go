package pipeline

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/prefixgate/prefixgate/normalize"
)

// The pipeline's defaults.
const (
	DefaultMaxBodyBytes    = 32 << 20
	DefaultMaxDecodedBytes = 64 << 20
	DefaultMaxStringBytes  = normalize.DefaultMaxStringBytes
	DefaultMaxRatio        = 100
	DefaultMaxDepth        = 128
)

// Config is the pipeline's limits and tenants. The zero value of every
// field takes a default (see Defaults).
type Config struct {
	// PrefixLength is the routing window N (1024..65536).
	PrefixLength int
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
	// Tenants maps API keys to tenant names; empty disables tenants.
	Tenants map[string]string
	// TenantSecret keys the HMACs of per-tenant groups and cache_salt.
	TenantSecret []byte
}

// Defaults returns c with every unset field at its default.
func (c Config) Defaults() Config {
	c.PrefixLength = cmp.Or(c.PrefixLength, normalize.DefaultPrefixLength)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxDecodedBytes = cmp.Or(c.MaxDecodedBytes, DefaultMaxDecodedBytes)
	c.MaxStringBytes = cmp.Or(c.MaxStringBytes, int(min(DefaultMaxStringBytes, c.MaxDecodedBytes)))
	c.MaxRatio = cmp.Or(c.MaxRatio, DefaultMaxRatio)
	c.MaxDepth = cmp.Or(c.MaxDepth, DefaultMaxDepth)
	return c
}

// Validate reports the first invalid field by its configuration key.
func (c Config) Validate() error {
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
	return nil
}
