package pipeline

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/prefixgate/prefixgate/internal/sticky"
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
	// SettingName names a field (MaxStringBytes) as an operator sets it
	// (flag, key, variable), for the end of a limit error's message; nil
	// names the Config field.
	SettingName func(field string) string
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

// Validate reports the first invalid field, its message starting with the
// field's name.
func (c Config) Validate() error {
	if c.PrefixLength < normalize.MinPrefixLength || c.PrefixLength > normalize.MaxPrefixLength {
		return fmt.Errorf("PrefixLength: %d is outside %d..%d", c.PrefixLength, normalize.MinPrefixLength, normalize.MaxPrefixLength)
	}
	if c.MaxBodyBytes < 1024 {
		return fmt.Errorf("MaxBodyBytes: %d is below 1024", c.MaxBodyBytes)
	}
	if c.MaxDecodedBytes < 1024 {
		return fmt.Errorf("MaxDecodedBytes: %d is below 1024", c.MaxDecodedBytes)
	}
	// Below 1 the decoder and normalizer would take their own defaults
	// silently, not the limit the operator asked for.
	if c.MaxDepth < 1 {
		return fmt.Errorf("MaxDepth: %d is below 1", c.MaxDepth)
	}
	if c.MaxRatio < 1 {
		return fmt.Errorf("MaxRatio: %d is below 1", c.MaxRatio)
	}
	if c.MaxStringBytes < 16 || int64(c.MaxStringBytes) > c.MaxDecodedBytes {
		return fmt.Errorf("MaxStringBytes: %d is outside 16..%d (the decoded body limit)", c.MaxStringBytes, c.MaxDecodedBytes)
	}
	return c.validateTenants()
}

func (c Config) validateTenants() error {
	if len(c.Tenants) == 0 {
		return nil
	}
	for _, tenant := range c.Tenants {
		if tenant == "" {
			return errors.New("Tenants: a key maps to an empty tenant name")
		}
		if len(tenant) > sticky.MaxTenantBytes {
			return fmt.Errorf("Tenants: a tenant name of %d bytes is over %d", len(tenant), sticky.MaxTenantBytes)
		}
	}
	if len(c.TenantSecret) < 16 {
		return errors.New("TenantSecret: a secret of at least 16 bytes is required")
	}
	return nil
}

// limitFields maps a normalizer's limit error code to the Config field
// that sets the limit.
var limitFields = map[string]string{
	normalize.CodeSizeLimit:        "MaxBodyBytes",
	normalize.CodeDecodedSize:      "MaxDecodedBytes",
	normalize.CodeCompressionRatio: "MaxRatio",
	normalize.CodeDepthLimit:       "MaxDepth",
	normalize.CodeStringLimit:      "MaxStringBytes",
}

// Raises says what raises the limit set by field, as the end of a limit
// error's message.
func (c Config) Raises(field string) string {
	name := "pipeline.Config." + field
	if c.SettingName != nil {
		name = c.SettingName(field)
	}
	return " (raise it with " + name + ")"
}

// LimitHint is Raises for a normalizer error: what raises the limit it
// hit, or "" when it is no limit error.
func (c Config) LimitHint(code string) string {
	if f, ok := limitFields[code]; ok {
		return c.Raises(f)
	}
	return ""
}
