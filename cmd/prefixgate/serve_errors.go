package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/prefixgate/prefixgate/internal/config"
	"github.com/prefixgate/prefixgate/route"
)

// setting is one serve setting under its three names.
type setting struct {
	key   string // YAML key, dotted (routing.policy)
	short string // the key as the server's validation names it, if different
	flag  string
	env   string
}

var serveSettings = []setting{
	{"listen", "", "listen", "PREFIXGATE_LISTEN"},
	{"backends", "", "backend", "PREFIXGATE_BACKENDS"},
	{"routing.policy", "", "policy", "PREFIXGATE_POLICY"},
	{"routing.load_factor", "load_factor", "load-factor", "PREFIXGATE_LOAD_FACTOR"},
	{"routing.threshold", "threshold", "threshold", "PREFIXGATE_THRESHOLD"},
	{"routing.prefix_length", "prefix_length", "prefix-length", "PREFIXGATE_PREFIX_LENGTH"},
	{"routing.retries", "retries", "", ""},
	{"limits.max_body_bytes", "max_body_bytes", "max-body-bytes", "PREFIXGATE_MAX_BODY_BYTES"},
	{"drain_timeout", "", "drain-timeout", "PREFIXGATE_DRAIN_TIMEOUT"},
	{"log.format", "", "log-json", "PREFIXGATE_LOG_FORMAT"},
	{"log.level", "", "log-level", "PREFIXGATE_LOG_LEVEL"},
	{"tracing.otlp_endpoint", "", "otlp-endpoint", "PREFIXGATE_OTLP_ENDPOINT"},
	{"cors.allowed_origins", "", "cors-origin", ""},
}

// explainSettingError says where a rejected setting came from: the flag
// when it was given, else the environment variable, else the config file
// with the key's line. Validation names YAML keys; an operator who set a
// flag should read the flag.
func explainSettingError(err error, f serveFlags, set map[string]bool, lookup func(string) (string, bool)) error {
	if err == nil {
		return nil
	}
	key, rest, ok := strings.Cut(err.Error(), ": ")
	if !ok {
		return err
	}
	for _, s := range serveSettings {
		if key != s.key && key != s.short {
			continue
		}
		if s.flag != "" && set[s.flag] {
			return fmt.Errorf("--%s: %s", s.flag, rest)
		}
		if _, ok := lookup(s.env); s.env != "" && ok {
			return fmt.Errorf("%s: %s", s.env, rest)
		}
		if f.configPath != "" {
			if line := config.KeyLine(f.configPath, s.key, os.ReadFile); line > 0 {
				return fmt.Errorf("%s:%d: %s: %s", f.configPath, line, s.key, rest)
			}
		}
		return errors.New(s.key + ": " + rest)
	}
	return err
}

// effectivePolicy is the policy the router runs: the configured one, or
// route's default when none is set.
func effectivePolicy(p string) string {
	if p == "" {
		return route.DefaultPolicy
	}
	return p
}
