package main

import (
	"fmt"
	"net/url"
	"strings"
)

// haproxyConfig is the HAProxy 2.6 configuration the benchmark compares
// against: HTTP mode, the whole body buffered (up to one buffer) so the
// balancer can read it, consistent hashing on the body's first hashBytes
// bytes with bounded loads (hash-balance-factor 125, the same c = 1.25 as
// prefixgate's default), keep-alive on both sides and backend connections
// shared between clients, and /health checks like prefixgate's.
func haproxyConfig(listen string, backends []string, hashBytes, threads int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, `global
    nbthread %d
    maxconn 4096

defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    option http-keep-alive
    http-reuse always

frontend llm_front
    bind %s
    default_backend llm

backend llm
    option http-buffer-request
    balance hash req.body,bytes(0,%d)
    hash-type consistent
    hash-balance-factor 125
    option httpchk GET /health
`, threads, listen, hashBytes)
	for i, raw := range backends {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("backend %q: not a base URL", raw)
		}
		fmt.Fprintf(&b, "    server s%d %s check inter 2s\n", i, u.Host)
	}
	return b.String(), nil
}
