package server

import (
	"net/http"

	"github.com/prefixgate/prefixgate/internal/pipeline"
)

// authenticate maps the bearer API key to a tenant (pipeline.Authenticate);
// without configured tenants it passes every request through unchanged.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if !s.pipe.TenantsEnabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics", "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch":
			next.ServeHTTP(w, r)
			return
		}
		tenant, err := s.pipe.Authenticate(r.Header.Get("Authorization"))
		if err != nil {
			writeErrorFor(w, r, err)
			return
		}
		// The key identifies the caller to prefixgate, not to the backend.
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r.WithContext(pipeline.WithTenant(r.Context(), tenant)))
	})
}
