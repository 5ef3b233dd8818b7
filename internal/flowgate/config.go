package flowgate

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
)

// The request headers that carry a flow, as llm-d and the Gateway API
// Inference Extension name them (canonical form; gRPC and Connect carry
// the same names as metadata).
const (
	FairnessHeader         = "X-Llm-D-Inference-Fairness-Id"
	GatewayFairnessHeader  = "X-Gateway-Inference-Fairness-Id"
	ObjectiveHeader        = "X-Llm-D-Inference-Objective"
	GatewayObjectiveHeader = "X-Gateway-Inference-Objective"
	// FlowHeader, on a response, says which flow and band the request ran
	// in and how long it queued.
	FlowHeader = "X-Prefixgate-Flow"
)

// Defaults of Config.
const (
	DefaultMetricFlows  = 20
	MaxMetricFlows      = 1000
	DefaultRetryAfter   = time.Second
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultHeadroomPrefillTokens is flow_control.headroom_prefill_tokens'
	// default (flowcontrol.DefaultPrefillHeadroom).
	DefaultHeadroomPrefillTokens = flowcontrol.DefaultPrefillHeadroom
	// DefaultFairnessID is the flow of a request that names none.
	DefaultFairnessID = "default"
)

// Config is the flow_control section of the configuration. The zero value
// means the defaults, flow control on.
type Config struct {
	// Enabled turns flow control on; nil is true.
	Enabled *bool
	// Objectives maps objective names to priorities (integers as text).
	Objectives map[string]string
	// TenantObjectives maps a fairness id to its default objective, and
	// TenantMaxObjectives to the highest objective it may ask for.
	TenantObjectives    map[string]string
	TenantMaxObjectives map[string]string
	// DefaultObjective and MaxObjective apply to fairness ids the two
	// maps do not name.
	DefaultObjective string
	MaxObjective     string
	// FairnessHeader names one more header that carries the fairness id,
	// read after the two standard ones.
	FairnessHeader string
	// TTL is how long a request may wait (0: 60s); BandTTLs overrides it
	// per objective name (durations as text).
	TTL      time.Duration
	BandTTLs map[string]string
	// MaxQueuedRequests and MaxQueuedBytes cap each band (0: 1000 and
	// 128 MiB).
	MaxQueuedRequests int
	MaxQueuedBytes    int64
	// MaxFlows bounds the flows remembered (0: 10000).
	MaxFlows int
	// PromptWeight is a prompt token's cost against an output token's 1
	// (0: 0.5).
	PromptWeight float64
	// MaxWaiting, MaxKVUtilization and MaxSignalAge are the saturation
	// thresholds (flowcontrol.Thresholds).
	MaxWaiting       int
	MaxKVUtilization float64
	MaxSignalAge     time.Duration
	// MaxQueuedTokens bounds the prompt tokens the prefix-index policy
	// counts as queued on a member (route.Load.QueuedTokens): at it the
	// member is full. 0 turns the bound off; with other policies the count
	// is 0.
	MaxQueuedTokens int
	// HeadroomWindow and HeadroomFraction keep slots for active higher
	// bands (flowcontrol.HeadroomConfig).
	HeadroomWindow   time.Duration
	HeadroomFraction float64
	// HeadroomPrefillTokens: while a band above a request's is active, a
	// member on which the prefix-index policy counts this many prompt
	// tokens whose first byte has not come (route.Load.QueuedTokens) takes
	// no request of the lower band. 0 means
	// DefaultHeadroomPrefillTokens; negative turns it off.
	HeadroomPrefillTokens int
	// ShortPromptShare is the share of the backends (rounded down) kept
	// free of long prompts' prefill while short prompts are active
	// (flowcontrol.RoomConfig.ShortShare; a prompt is long from
	// HeadroomPrefillTokens tokens). 0 means flowcontrol.DefaultShortShare;
	// negative turns it off.
	ShortPromptShare float64
	// EnginePriority sends each request's priority to engines that
	// schedule by it, in the engine's own field; EnginePriorityField
	// overrides the field's name for every engine.
	EnginePriority      bool
	EnginePriorityField string
	// MetricFlows is how many fairness ids get a label of their own in the
	// metrics (0: 20); the others are counted as "other".
	MetricFlows int
}

// On reports whether flow control is enabled.
func (c Config) On() bool { return c.Enabled == nil || *c.Enabled }

// compiled is a validated Config.
type compiled struct {
	cfg    Config
	policy *flowcontrol.Policy
	room   flowcontrol.RoomConfig
}

// Parts are what c gives package flowcontrol, validated: the policy that
// orders the queue, and how each member is judged for admission (slow
// start rescrapes at most every DefaultPollInterval). The gate runs on
// them; the simulator builds serve's flow control from them.
func (c Config) Parts() (*flowcontrol.Policy, flowcontrol.RoomConfig, error) {
	cc, err := c.compile()
	if err != nil {
		return nil, flowcontrol.RoomConfig{}, err
	}
	return cc.policy, cc.room, nil
}

// Validate checks c; errors name the setting (flow_control.KEY).
func (c Config) Validate() error {
	_, err := c.compile()
	return err
}

func (c Config) compile() (compiled, error) {
	pc, err := c.policyConfig()
	if err != nil {
		return compiled{}, err
	}
	pol, err := flowcontrol.NewPolicy(pc)
	if err != nil {
		return compiled{}, err
	}
	room, err := flowcontrol.RoomConfig{
		Thresholds:      flowcontrol.Thresholds{MaxWaiting: c.MaxWaiting, MaxKVUtil: c.MaxKVUtilization, MaxSignalAge: c.MaxSignalAge},
		Headroom:        flowcontrol.HeadroomConfig{Window: c.HeadroomWindow, Fraction: c.HeadroomFraction},
		PrefillHeadroom: c.HeadroomPrefillTokens,
		ShortShare:      c.ShortPromptShare,
		TokenLimit:      c.MaxQueuedTokens,
		EnginePriority:  c.EnginePriority,
		Rescrape:        DefaultPollInterval,
	}.Validate()
	if err != nil {
		return compiled{}, err
	}
	if c.MetricFlows < 0 || c.MetricFlows > MaxMetricFlows {
		return compiled{}, fmt.Errorf("flow_control.metric_flows: %d is outside 0..%d", c.MetricFlows, MaxMetricFlows)
	}
	c.MetricFlows = cmp.Or(c.MetricFlows, DefaultMetricFlows)
	c.HeadroomPrefillTokens = cmp.Or(c.HeadroomPrefillTokens, DefaultHeadroomPrefillTokens)
	if err := checkHeaderName("flow_control.fairness_header", c.FairnessHeader); err != nil {
		return compiled{}, err
	}
	if err := checkField(c.EnginePriorityField); err != nil {
		return compiled{}, err
	}
	c.FairnessHeader = http.CanonicalHeaderKey(c.FairnessHeader)
	return compiled{cfg: c, policy: pol, room: room}, nil
}

func (c Config) policyConfig() (flowcontrol.Config, error) {
	pc := flowcontrol.Config{
		Objectives:    make(map[string]int, len(c.Objectives)),
		Tenants:       map[string]flowcontrol.Tenant{},
		DefaultTenant: flowcontrol.Tenant{Objective: c.DefaultObjective, MaxObjective: c.MaxObjective},
		BandDefaults:  flowcontrol.BandLimits{MaxRequests: c.MaxQueuedRequests, MaxBytes: c.MaxQueuedBytes, TTL: c.TTL},
		Bands:         map[string]flowcontrol.BandLimits{},
		MaxFlows:      c.MaxFlows,
		PromptWeight:  c.PromptWeight,
	}
	for name, v := range c.Objectives {
		p, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return pc, fmt.Errorf("flow_control.objectives.%s: %q is not an integer priority", name, v)
		}
		pc.Objectives[name] = p
	}
	if err := c.checkObjectiveNames(pc.Objectives); err != nil {
		return pc, err
	}
	// A tenant named in one map takes the defaults for the other.
	for id := range c.TenantObjectives {
		pc.Tenants[id] = c.tenant(id)
	}
	for id := range c.TenantMaxObjectives {
		pc.Tenants[id] = c.tenant(id)
	}
	above := func(t flowcontrol.Tenant) bool {
		return t.Objective != "" && t.MaxObjective != "" && pc.Objectives[t.Objective] > pc.Objectives[t.MaxObjective]
	}
	if above(pc.DefaultTenant) {
		return pc, fmt.Errorf("flow_control.default_objective: %q (priority %d) is above flow_control.max_objective %q (priority %d)",
			c.DefaultObjective, pc.Objectives[c.DefaultObjective], c.MaxObjective, pc.Objectives[c.MaxObjective])
	}
	for id, t := range pc.Tenants {
		if !above(t) {
			continue
		}
		if _, own := c.TenantObjectives[id]; own {
			return pc, fmt.Errorf("flow_control.tenant_objectives.%s: objective %q (priority %d) is above its max objective %q (priority %d)",
				id, t.Objective, pc.Objectives[t.Objective], t.MaxObjective, pc.Objectives[t.MaxObjective])
		}
		// The default objective is above this tenant's own ceiling: the
		// ceiling is its default.
		t.Objective = t.MaxObjective
		pc.Tenants[id] = t
	}
	for name, v := range c.BandTTLs {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return pc, fmt.Errorf("flow_control.band_ttls.%s: %q is not a positive duration such as 10s", name, v)
		}
		pc.Bands[name] = flowcontrol.BandLimits{TTL: d}
	}
	return pc, nil
}

func checkHeaderName(key, name string) error {
	if len(name) > 128 {
		return fmt.Errorf("%s: header name of %d bytes, at most 128", key, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%s: %q is not a header name (letters, digits, '-', '_')", key, name)
		}
	}
	return nil
}

func checkField(name string) error {
	if len(name) > 64 {
		return fmt.Errorf("flow_control.engine_priority_field: %d bytes, at most 64", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("flow_control.engine_priority_field: %q is not a JSON field name (letters, digits, '_')", name)
		}
	}
	return nil
}

// tenant is fairness id's policy: its own objective and ceiling, else the
// defaults.
func (c Config) tenant(id string) flowcontrol.Tenant {
	t := flowcontrol.Tenant{Objective: c.DefaultObjective, MaxObjective: c.MaxObjective}
	if o, ok := c.TenantObjectives[id]; ok {
		t.Objective = o
	}
	if o, ok := c.TenantMaxObjectives[id]; ok {
		t.MaxObjective = o
	}
	return t
}

// checkObjectiveNames reports an objective name that objectives does not
// define, under the key that names it.
func (c Config) checkObjectiveNames(objectives map[string]int) error {
	check := func(key, name string) error {
		if _, ok := objectives[name]; ok || name == "" {
			return nil
		}
		names := make([]string, 0, len(objectives))
		for n := range objectives {
			names = append(names, n)
		}
		slices.Sort(names)
		return fmt.Errorf("%s: %w %q (flow_control.objectives defines %v)", key, flowcontrol.ErrUnknownObjective, name, names)
	}
	if err := check("flow_control.default_objective", c.DefaultObjective); err != nil {
		return err
	}
	if err := check("flow_control.max_objective", c.MaxObjective); err != nil {
		return err
	}
	for _, m := range []struct {
		key   string
		names map[string]string
	}{{"flow_control.tenant_objectives", c.TenantObjectives}, {"flow_control.tenant_max_objectives", c.TenantMaxObjectives}} {
		for id, name := range m.names {
			if err := check(m.key+"."+id, name); err != nil {
				return err
			}
		}
	}
	for name := range c.BandTTLs {
		if err := check("flow_control.band_ttls."+name, name); err != nil {
			return err
		}
	}
	return nil
}
