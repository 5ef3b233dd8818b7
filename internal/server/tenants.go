package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/prefixgate/prefixgate/normalize"
)

// With tenants configured, every request must name its tenant by API key.
// The tenant then shapes two things: the routing key (its group is mixed
// with the tenant, so two tenants never share a key) and vLLM's cache_salt
// (an HMAC of the tenant under the server secret), so that no KV block is
// ever shared across tenants and one tenant cannot time another's prompts.

type tenantKey struct{}

// tenantFrom returns the authenticated tenant, or "" without tenants.
func tenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// authenticate maps the bearer API key to a tenant; without configured
// tenants it passes every request through unchanged.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if len(s.cfg.Tenants) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics", "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch":
			next.ServeHTTP(w, r)
			return
		}
		tenant, err := s.tenantFor(r.Header.Get("Authorization"))
		if err != nil {
			writeError(w, err)
			return
		}
		// The key identifies the caller to prefixgate, not to the backend.
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
}

// tenantMAC is the HMAC-SHA256 of parts under the server secret, in hex.
func (s *Server) tenantMAC(parts ...string) string {
	m := hmac.New(sha256.New, s.cfg.TenantSecret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// tenantScope rewrites a request for its tenant inside normalization's one
// pass: the group becomes a MAC of tenant and group (printable, 32 hex
// digits), and cache_salt is set to a MAC of the tenant and any
// caller-supplied salt, so a caller's own salt still separates its
// requests but never matches another tenant's.
func (s *Server) tenantScope(tenant string) normalize.Scope {
	return func(group, salt string) (string, string) {
		return s.tenantMAC("group", tenant, group)[:32], s.tenantMAC("cache_salt", tenant, salt)[:32]
	}
}

// tenantSaltRoom is what a tenant's cache_salt member can add to a body.
const tenantSaltRoom = len(`,"cache_salt":""`) + 32

var errNotAnObject = &requestError{status: http.StatusBadRequest, code: "not_an_object",
	msg: "invalid request body: with tenants configured the body must be a JSON object"}

// jsonObject reports whether a valid JSON text is an object.
func jsonObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\n\r")
	return len(b) > 0 && b[0] == '{'
}
