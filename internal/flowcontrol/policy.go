package flowcontrol

import (
	"cmp"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Flow is what a request's place in the queue is decided by: who asks
// (FairnessID) and how much it matters (Priority, higher first; negative
// is sheddable).
type Flow struct {
	FairnessID string
	Priority   int
}

// Sheddable reports whether the flow's requests are refused at once while
// the fleet is saturated (Priority < 0).
func (f Flow) Sheddable() bool { return f.Priority < 0 }

// Limits bound configuration input and the queue's own tables.
const (
	MaxObjectives     = 64
	MaxTenants        = 100000
	MaxNameLen        = 128
	MaxPriority       = 1 << 20
	MaxBands          = MaxObjectives + 1
	DefaultMaxFlows   = 10000
	MaxFlowsLimit     = 1 << 20
	DefaultTTL        = 60 * time.Second
	DefaultBandReqs   = 1000
	DefaultBandBytes  = 128 << 20
	DefaultPromptWght = 0.5
)

// Tenant is a tenant's flow-control policy.
type Tenant struct {
	// Objective is used when a request names none; empty means priority 0.
	Objective string `json:"objective,omitempty" yaml:"objective,omitempty"`
	// MaxObjective is the highest objective the tenant may ask for: a
	// request above it runs at its priority instead. Empty: no ceiling.
	MaxObjective string `json:"max_objective,omitempty" yaml:"max_objective,omitempty"`
}

// BandLimits bound one priority band of the queue.
type BandLimits struct {
	// MaxRequests is the most requests the band holds; 0 means
	// DefaultBandReqs.
	MaxRequests int `json:"max_requests,omitempty" yaml:"max_requests,omitempty"`
	// MaxBytes is the most request bytes the band holds; 0 means
	// DefaultBandBytes.
	MaxBytes int64 `json:"max_bytes,omitempty" yaml:"max_bytes,omitempty"`
	// TTL is the longest a request waits in the band; 0 means DefaultTTL.
	TTL time.Duration `json:"ttl,omitempty" yaml:"ttl,omitempty"`
}

// Config is flow control's configuration (file section flow_control).
type Config struct {
	// Objectives maps an objective name to its priority.
	Objectives map[string]int `json:"objectives,omitempty" yaml:"objectives,omitempty"`
	// Tenants maps a fairness id (the authenticated tenant) to its policy.
	Tenants map[string]Tenant `json:"tenants,omitempty" yaml:"tenants,omitempty"`
	// DefaultTenant applies to every fairness id not in Tenants.
	DefaultTenant Tenant `json:"default_tenant,omitzero" yaml:"default_tenant,omitempty"`
	// Bands overrides BandDefaults per objective name.
	Bands map[string]BandLimits `json:"bands,omitempty" yaml:"bands,omitempty"`
	// BandDefaults applies to every band Bands does not name.
	BandDefaults BandLimits `json:"band_defaults,omitzero" yaml:"band_defaults,omitempty"`
	// MaxFlows is the most flows tracked; idle flows are forgotten first.
	// 0 means DefaultMaxFlows.
	MaxFlows int `json:"max_flows,omitempty" yaml:"max_flows,omitempty"`
	// PromptWeight is what one prompt token costs in served tokens, an
	// output token costing 1. 0 means DefaultPromptWght.
	PromptWeight float64 `json:"prompt_weight,omitempty" yaml:"prompt_weight,omitempty"`
}

// ErrUnknownObjective matches (errors.Is) the error of a request naming an
// objective the configuration does not define.
var ErrUnknownObjective = errors.New("flowcontrol: unknown objective")

// Policy is a validated Config: it resolves a request's priority and a
// band's limits. It is immutable and safe for concurrent use.
type Policy struct {
	objectives map[string]int
	names      []string // sorted, for error messages
	tenants    map[string]tenantRule
	dflt       tenantRule
	bands      map[int]BandLimits
	bandDflt   BandLimits
	maxFlows   int
	promptW    float64
}

type tenantRule struct {
	prio    int
	ceiling int
	capped  bool // ceiling applies
}

// NewPolicy validates cfg and returns its policy. Errors name the key.
func NewPolicy(cfg Config) (*Policy, error) {
	p := &Policy{objectives: make(map[string]int, len(cfg.Objectives)), bands: map[int]BandLimits{}}
	if err := p.setObjectives(cfg.Objectives); err != nil {
		return nil, err
	}
	var err error
	if p.dflt, err = p.rule("flow_control.default_tenant", cfg.DefaultTenant); err != nil {
		return nil, err
	}
	if len(cfg.Tenants) > MaxTenants {
		return nil, fmt.Errorf("flow_control.tenants: %d entries, at most %d", len(cfg.Tenants), MaxTenants)
	}
	p.tenants = make(map[string]tenantRule, len(cfg.Tenants))
	for name, t := range cfg.Tenants {
		if name == "" || len(name) > MaxNameLen {
			return nil, fmt.Errorf("flow_control.tenants: tenant name %q must be 1..%d bytes", name, MaxNameLen)
		}
		if p.tenants[name], err = p.rule("flow_control.tenants."+name, t); err != nil {
			return nil, err
		}
	}
	if p.bandDflt, err = fillBand("flow_control.band_defaults", cfg.BandDefaults, BandLimits{}); err != nil {
		return nil, err
	}
	for name, b := range cfg.Bands {
		prio, ok := p.objectives[name]
		if !ok {
			return nil, fmt.Errorf("flow_control.bands.%s: %w %q (defined: %v)", name, ErrUnknownObjective, name, p.names)
		}
		if p.bands[prio], err = fillBand("flow_control.bands."+name, b, p.bandDflt); err != nil {
			return nil, err
		}
	}
	return p, p.setQueueKnobs(cfg)
}

func (p *Policy) setObjectives(obj map[string]int) error {
	if len(obj) > MaxObjectives {
		return fmt.Errorf("flow_control.objectives: %d objectives, at most %d", len(obj), MaxObjectives)
	}
	for name, prio := range obj {
		if err := checkName(name); err != nil {
			return fmt.Errorf("flow_control.objectives: %w", err)
		}
		if prio < -MaxPriority || prio > MaxPriority {
			return fmt.Errorf("flow_control.objectives.%s: priority %d is outside %d..%d", name, prio, -MaxPriority, MaxPriority)
		}
		p.objectives[name] = prio
		p.names = append(p.names, name)
	}
	sort.Strings(p.names)
	return nil
}

func (p *Policy) setQueueKnobs(cfg Config) error {
	if cfg.MaxFlows < 0 || cfg.MaxFlows > MaxFlowsLimit {
		return fmt.Errorf("flow_control.max_flows: %d is outside 0..%d", cfg.MaxFlows, MaxFlowsLimit)
	}
	p.maxFlows = cmp.Or(cfg.MaxFlows, DefaultMaxFlows)
	if !(cfg.PromptWeight >= 0 && cfg.PromptWeight <= 100) {
		return fmt.Errorf("flow_control.prompt_weight: %v is outside 0..100", cfg.PromptWeight)
	}
	p.promptW = cmp.Or(cfg.PromptWeight, DefaultPromptWght)
	return nil
}

func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("objective name %q must be 1..%d bytes", name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("objective name %q: byte %q is not a letter, digit, '-', '_' or '.'", name, c)
		}
	}
	return nil
}

func (p *Policy) rule(key string, t Tenant) (tenantRule, error) {
	var r tenantRule
	if t.Objective != "" {
		prio, ok := p.objectives[t.Objective]
		if !ok {
			return r, fmt.Errorf("%s.objective: %w %q (defined: %v)", key, ErrUnknownObjective, t.Objective, p.names)
		}
		r.prio = prio
	}
	if t.MaxObjective != "" {
		ceil, ok := p.objectives[t.MaxObjective]
		if !ok {
			return r, fmt.Errorf("%s.max_objective: %w %q (defined: %v)", key, ErrUnknownObjective, t.MaxObjective, p.names)
		}
		r.ceiling, r.capped = ceil, true
		if r.prio > ceil {
			return r, fmt.Errorf("%s: objective %q (priority %d) is above max_objective %q (priority %d)", key, t.Objective, r.prio, t.MaxObjective, ceil)
		}
	}
	return r, nil
}

func fillBand(key string, b, dflt BandLimits) (BandLimits, error) {
	if b.MaxRequests < 0 || b.MaxRequests > 1<<24 {
		return b, fmt.Errorf("%s.max_requests: %d is outside 0..%d", key, b.MaxRequests, 1<<24)
	}
	if b.MaxBytes < 0 {
		return b, fmt.Errorf("%s.max_bytes: %d is negative", key, b.MaxBytes)
	}
	if b.TTL < 0 {
		return b, fmt.Errorf("%s.ttl: %v is negative", key, b.TTL)
	}
	b.MaxRequests = cmp.Or(b.MaxRequests, dflt.MaxRequests, DefaultBandReqs)
	b.MaxBytes = cmp.Or(b.MaxBytes, dflt.MaxBytes, DefaultBandBytes)
	b.TTL = cmp.Or(b.TTL, dflt.TTL, DefaultTTL)
	return b, nil
}

// Resolution is how a request's priority was found.
type Resolution struct {
	// Priority is the request's band.
	Priority int
	// Objective is the objective used: the request's, else the tenant's
	// default, else empty (priority 0).
	Objective string
	// Capped is true when the request asked above its tenant's ceiling
	// and runs at the ceiling.
	Capped bool
}

// Resolve gives the priority of a request from fairness id tenant naming
// objective (empty: the tenant's default). An objective the configuration
// does not define is an error matching ErrUnknownObjective. It allocates
// nothing unless it fails.
func (p *Policy) Resolve(tenant, objective string) (Resolution, error) {
	r, ok := p.tenants[tenant]
	if !ok {
		r = p.dflt
	}
	res := Resolution{Priority: r.prio, Objective: objective}
	if objective != "" {
		prio, ok := p.objectives[objective]
		if !ok {
			return res, p.unknown(objective)
		}
		res.Priority = prio
	}
	if r.capped && res.Priority > r.ceiling {
		res.Priority, res.Capped = r.ceiling, true
	}
	return res, nil
}

func (p *Policy) unknown(objective string) error {
	if len(objective) > MaxNameLen {
		objective = objective[:MaxNameLen] + "..."
	}
	if len(p.names) == 0 {
		return fmt.Errorf("%w %q: no objectives are configured (flow_control.objectives)", ErrUnknownObjective, objective)
	}
	return fmt.Errorf("%w %q: defined objectives are %v", ErrUnknownObjective, objective, p.names)
}

// Band returns the limits of the band at priority.
func (p *Policy) Band(priority int) BandLimits {
	if b, ok := p.bands[priority]; ok {
		return b
	}
	return p.bandDflt
}

// Objectives returns the configured objective names, sorted.
func (p *Policy) Objectives() []string { return append([]string(nil), p.names...) }

// ObjectiveName returns an objective name whose priority is priority
// (the first in name order), or "" when none has it.
func (p *Policy) ObjectiveName(priority int) string {
	for _, n := range p.names {
		if p.objectives[n] == priority {
			return n
		}
	}
	return ""
}
