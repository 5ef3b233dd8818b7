package pipeline

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/prefixgate/prefixgate/normalize"
)

// With tenants configured, every request must name its tenant by API key.
// The tenant then shapes two things: the routing key (its group is mixed
// with the tenant, so two tenants never share a key) and vLLM's cache_salt
// (an HMAC of the tenant under the secret), so that no KV block is ever
// shared across tenants and one tenant cannot time another's prompts.

type tenantKey struct{}

// WithTenant returns ctx carrying the authenticated tenant, which Normalize
// then applies.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// tenantFrom returns the authenticated tenant, or "" without tenants.
func tenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// TenantFrom returns the authenticated tenant in ctx (WithTenant), or ""
// without tenants.
func TenantFrom(ctx context.Context) string { return tenantFrom(ctx) }

// TenantsEnabled reports whether requests must carry a tenant API key (the
// key is then prefixgate's, not the backend's, and is not forwarded).
func (p *Pipeline) TenantsEnabled() bool { return len(p.cfg.Tenants) > 0 }

// Authenticate maps authorization (an Authorization header's value) to its
// tenant: "" and nil without tenants, else a 401 unless it is a bearer API
// key from the configuration. Every configured key is compared, in constant
// time each, so the time taken does not tell which key matched.
func (p *Pipeline) Authenticate(authorization string) (string, error) {
	if len(p.cfg.Tenants) == 0 {
		return "", nil
	}
	key, ok := strings.CutPrefix(authorization, "Bearer ")
	tenant := ""
	for k, t := range p.cfg.Tenants {
		if ok && subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			tenant = t
		}
	}
	if tenant == "" {
		return "", &Error{Status: http.StatusUnauthorized, Code: "invalid_api_key",
			Message: "an API key is required: send Authorization: Bearer KEY with a key from the tenants configuration"}
	}
	return tenant, nil
}

// tenantMAC is the HMAC-SHA256 of parts under the tenant secret, in hex.
func (p *Pipeline) tenantMAC(parts ...string) string {
	m := hmac.New(sha256.New, p.cfg.TenantSecret)
	for _, s := range parts {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// tenantScope rewrites a request for its tenant inside normalization's one
// pass: the group becomes a MAC of tenant and group (printable, 32 hex
// digits), and cache_salt is set to a MAC of the tenant and any
// caller-supplied salt, so a caller's own salt still separates its
// requests but never matches another tenant's.
func (p *Pipeline) tenantScope(tenant string) normalize.Scope {
	return func(group, salt string) (string, string) {
		return p.tenantMAC("group", tenant, group)[:32], p.tenantMAC("cache_salt", tenant, salt)[:32]
	}
}

// tenantSaltRoom is what a tenant's cache_salt member can add to a body.
const tenantSaltRoom = len(`,"cache_salt":""`) + 32

var errNotAnObject = &Error{Status: http.StatusBadRequest, Code: "not_an_object",
	Message: "invalid request body: with tenants configured the body must be a JSON object"}

// jsonObject reports whether a valid JSON text is an object.
func jsonObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\n\r")
	return len(b) > 0 && b[0] == '{'
}
