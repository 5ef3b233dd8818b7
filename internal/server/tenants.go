package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

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
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tenant := ""
		if ok {
			for k, t := range s.cfg.Tenants {
				if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
					tenant = t
				}
			}
		}
		if tenant == "" {
			writeError(w, &requestError{status: http.StatusUnauthorized, code: "invalid_api_key",
				msg: "an API key is required: send Authorization: Bearer KEY with a key from the tenants configuration"})
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

// applyTenant rewrites a prepared request for its tenant: the group becomes
// a MAC of tenant and group (printable, 32 hex digits), and cache_salt is
// set to a MAC of the tenant and any caller-supplied salt, so a caller's own
// salt still separates its requests but never matches another tenant's.
func (s *Server) applyTenant(p prepared, tenant string, kopts normalize.KeyOptions, opts normalize.Options) (prepared, error) {
	group := s.tenantMAC("group", tenant, p.info.Group)[:32]
	salt := s.tenantMAC("cache_salt", tenant, gjson.GetBytes(p.body, "cache_salt").String())[:32]
	body, err := setTopLevelString(p.body, "cache_salt", salt)
	if err != nil {
		return p, err
	}
	kopts.Group = group
	out, info, err := normalize.Normalize(make([]byte, 0, len(body)), body, opts, kopts)
	if err != nil {
		return p, normalizeError(err)
	}
	return prepared{body: out, info: info}, nil
}

// setTopLevelString sets member name of a canonical JSON object to the
// string v (which needs no escaping), replacing any value it had.
func setTopLevelString(obj []byte, name, v string) ([]byte, error) {
	if len(obj) < 2 || obj[0] != '{' {
		return nil, &requestError{status: http.StatusBadRequest, code: "not_an_object",
			msg: "invalid request body: with tenants configured the body must be a JSON object"}
	}
	out := make([]byte, 0, len(obj)+len(name)+len(v)+8)
	if old := gjson.GetBytes(obj, name); old.Exists() && old.Index > 0 {
		out = append(out, obj[:old.Index]...)
		out = append(out, '"')
		out = append(out, v...)
		out = append(out, '"')
		return append(out, obj[old.Index+len(old.Raw):]...), nil
	}
	out = append(out, '{', '"')
	out = append(out, name...)
	out = append(out, '"', ':', '"')
	out = append(out, v...)
	out = append(out, '"')
	if len(obj) > 2 {
		out = append(out, ',')
	}
	return append(out, obj[1:]...), nil
}
