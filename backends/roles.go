package backends

import (
	"fmt"
	"strings"
)

// Role is what part of a request a backend runs in a disaggregated fleet:
// the prompt's prefill, the decode that streams the answer, or both (an
// ordinary replica). A fleet in which no backend names a role is an
// ordinary fleet.
type Role uint8

const (
	// RoleBoth runs whole requests: the default, and what a backend without
	// a ROLE+ prefix is.
	RoleBoth Role = iota
	// RolePrefill computes prompts and hands their KV cache to a decode
	// worker (vLLM kv_role kv_producer, SGLang --disaggregation-mode
	// prefill).
	RolePrefill
	// RoleDecode takes a prompt's KV cache from a prefill worker and
	// generates (vLLM kv_consumer, SGLang --disaggregation-mode decode).
	RoleDecode
)

var roleNames = [...]string{RoleBoth: "both", RolePrefill: "prefill", RoleDecode: "decode"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole reads a role name: prefill, decode or both (any case; "" is
// both).
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "both":
		return RoleBoth, nil
	case "prefill":
		return RolePrefill, nil
	case "decode":
		return RoleDecode, nil
	}
	return RoleBoth, fmt.Errorf("role %q is not prefill, decode or both", s)
}

// Prefills reports whether the role takes prefill legs.
func (r Role) Prefills() bool { return r != RoleDecode }

// Decodes reports whether the role takes decode legs and whole requests.
func (r Role) Decodes() bool { return r != RolePrefill }

// maxPrefixes bounds the ROLE+ENGINE+ prefixes a spec may carry.
const maxPrefixes = 2

// SplitSpec separates a backend spec's optional prefixes from the spec
// itself: a role (prefill, decode, both), then an engine (auto, vllm,
// sglang, llamacpp), each followed by '+', in that order, as in
// "prefill+vllm+http://10.0.0.5:8000", "decode+http://10.0.0.6:8000" or
// "sglang+http://10.0.0.7:30000". An unknown prefix, one given twice, or
// an engine before a role is an error naming the spec.
func SplitSpec(spec string) (Role, Engine, string, error) {
	s := strings.TrimSpace(spec)
	head := s
	if sep := strings.Index(s, "://"); sep >= 0 {
		head = s[:sep] // a '+' past "://" is in the path or query
	}
	parts := strings.Split(head, "+")
	if len(parts) == 1 {
		return RoleBoth, EngineAuto, s, nil
	}
	prefixes := parts[:len(parts)-1]
	if len(prefixes) > maxPrefixes {
		return RoleBoth, EngineAuto, "", fmt.Errorf("backend %q: at most ROLE+ENGINE+ before the URL", spec)
	}
	role, engine := RoleBoth, EngineAuto
	var haveRole, haveEngine bool
	for _, p := range prefixes {
		if p == "" {
			return RoleBoth, EngineAuto, "", fmt.Errorf("backend %q: empty prefix; expected [ROLE+][ENGINE+]URL", spec)
		}
		if r, err := ParseRole(p); err == nil {
			switch {
			case haveRole:
				return RoleBoth, EngineAuto, "", fmt.Errorf("backend %q: role given twice", spec)
			case haveEngine:
				return RoleBoth, EngineAuto, "", fmt.Errorf("backend %q: role %q after the engine; write ROLE+ENGINE+URL", spec, p)
			}
			role, haveRole = r, true
			continue
		}
		e, err := ParseEngine(p)
		if err != nil {
			return RoleBoth, EngineAuto, "", fmt.Errorf("backend %q: prefix %q is neither a role (prefill, decode, both) nor an engine (auto, vllm, sglang, llamacpp)", spec, p)
		}
		if haveEngine {
			return RoleBoth, EngineAuto, "", fmt.Errorf("backend %q: engine given twice", spec)
		}
		engine, haveEngine = e, true
	}
	rest := s[len(strings.Join(prefixes, "+"))+1:]
	if rest == "" {
		return RoleBoth, EngineAuto, "", fmt.Errorf("backend %q: expected [ROLE+][ENGINE+]URL", spec)
	}
	return role, engine, rest, nil
}

// BootstrapPort is the port of the backend's SGLang bootstrap server as
// its /get_server_info states it (disaggregation_bootstrap_port, when its
// disaggregation_mode is prefill or decode); 0 while unknown or for
// another engine.
func (b *Backend) BootstrapPort() int { return int(b.bootstrapPort.Load()) }

// Role returns the backend's role, as its spec named it.
func (b *Backend) Role() Role { return b.role }

// HasRoles reports whether any of bs names a role other than both: the
// fleet is disaggregated.
func HasRoles(bs []*Backend) bool {
	for _, b := range bs {
		if b.role != RoleBoth {
			return true
		}
	}
	return false
}
