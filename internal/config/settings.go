// Package config reads prefixgate's configuration: a YAML file, then
// PREFIXGATE_* environment variables, then command-line flags, each
// overriding the one before. One table (Table) names every setting under
// its file key, flag and environment variable; the packages that use a
// setting own its type, default and validation (route, backends, server),
// and this package only carries values into them and says where a
// rejected value came from.
//
// It does not apply configuration; internal/server does, including reloads.
package config

import (
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// Settings is one run's configuration: the server's, which composes the
// router's and the backend pool's, and the command's own.
type Settings struct {
	Server server.Config

	// Listen is serve's address for HTTP/1.1 and h2c (or TLS).
	Listen string
	// TLSCertFile and TLSKeyFile serve HTTPS and HTTP/2; both or neither.
	TLSCertFile string
	TLSKeyFile  string
	// AdminListen is the operator's listener (off when empty); AdminPprof
	// adds /debug/pprof to it.
	AdminListen string
	AdminPprof  bool
	// LogFormat is text or json; LogLevel debug, info, warn or error.
	LogFormat string
	LogLevel  string
	// DrainTimeout is how long requests may finish after SIGTERM.
	DrainTimeout time.Duration
	// TenantSecretEnv names the environment variable holding the tenants'
	// HMAC secret (Server.TenantSecret).
	TenantSecretEnv string
	// EPPListen, EPPHealthListen and EPPMetricsListen are the endpoint
	// picker's ports.
	EPPListen        string
	EPPHealthListen  string
	EPPMetricsListen string
	// ConfigPath is the YAML file; ConfigPoll how often it is checked for
	// changes (0: only on SIGHUP).
	ConfigPath string
	ConfigPoll time.Duration
	// Kubeconfig is the kubeconfig file k8s:// and inferencepool://
	// backends reach the API server with; empty: the pod's service
	// account (internal/kubedisco).
	Kubeconfig string
}
