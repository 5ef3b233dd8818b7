package server

import (
	"net/http"
	"slices"
	"strings"
)

// Browsers reach the Connect and gRPC-Web services (Connect-ES transports)
// only if the router answers CORS for their origin. The header lists are
// what the Connect and gRPC-Web protocols send and read.
var (
	corsAllowHeaders = strings.Join([]string{
		"Content-Type", "Content-Encoding", "Accept-Encoding", "Authorization",
		"Connect-Protocol-Version", "Connect-Timeout-Ms", "Connect-Content-Encoding", "Connect-Accept-Encoding",
		"Grpc-Timeout", "Grpc-Encoding", "Grpc-Accept-Encoding", "X-Grpc-Web", "X-User-Agent",
		GroupHeader, RequestIDHeader, "Traceparent", "Tracestate",
	}, ", ")
	corsExposeHeaders = strings.Join([]string{
		"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "Content-Encoding", "Connect-Content-Encoding",
		BackendHeader, DecisionHeader, KeyHeader, RequestIDHeader, "Retry-After",
	}, ", ")
)

// cors answers preflight requests and marks responses for the configured
// origins ("*" allows any). Without origins it adds nothing.
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.cfg.CORSOrigins) == 0 {
		return next
	}
	any := slices.Contains(s.cfg.CORSOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !(any || slices.Contains(s.cfg.CORSOrigins, origin)) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", "7200")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
