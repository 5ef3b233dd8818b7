package flowcontrol

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func testPolicy(t testing.TB, cfg Config) *Policy {
	t.Helper()
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolve(t *testing.T) {
	p := testPolicy(t, Config{
		Objectives:    map[string]int{"interactive": 10, "standard": 0, "batch": -1},
		Tenants:       map[string]Tenant{"acme": {Objective: "interactive"}, "free": {Objective: "batch", MaxObjective: "standard"}},
		DefaultTenant: Tenant{MaxObjective: "standard"},
	})
	for _, tc := range []struct {
		tenant, obj string
		want        Resolution
	}{
		{"acme", "", Resolution{Priority: 10}},
		{"acme", "batch", Resolution{Priority: -1, Objective: "batch"}},
		{"free", "", Resolution{Priority: -1}},
		{"free", "interactive", Resolution{Priority: 0, Objective: "interactive", Capped: true}},
		{"someone", "", Resolution{Priority: 0}},
		{"someone", "interactive", Resolution{Priority: 0, Objective: "interactive", Capped: true}},
		{"someone", "batch", Resolution{Priority: -1, Objective: "batch"}},
	} {
		got, err := p.Resolve(tc.tenant, tc.obj)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q, %q) = %+v, %v; want %+v", tc.tenant, tc.obj, got, err, tc.want)
		}
	}
	_, err := p.Resolve("acme", "urgent")
	if !errors.Is(err, ErrUnknownObjective) || !strings.Contains(err.Error(), `"urgent"`) || !strings.Contains(err.Error(), "interactive") {
		t.Errorf("unknown objective: %v", err)
	}
	_, err = testPolicy(t, Config{}).Resolve("x", "interactive")
	if !errors.Is(err, ErrUnknownObjective) || !strings.Contains(err.Error(), "flow_control.objectives") {
		t.Errorf("no objectives: %v", err)
	}
}

func TestPolicyErrors(t *testing.T) {
	obj := map[string]int{"hi": 5, "lo": -1}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Objectives: map[string]int{"": 1}}, "objective name"},
		{Config{Objectives: map[string]int{"a b": 1}}, `byte ' '`},
		{Config{Objectives: map[string]int{"x": MaxPriority + 1}}, "flow_control.objectives.x: priority"},
		{Config{Objectives: obj, Tenants: map[string]Tenant{"t": {Objective: "mid"}}}, `flow_control.tenants.t.objective: flowcontrol: unknown objective "mid"`},
		{Config{Objectives: obj, Tenants: map[string]Tenant{"t": {MaxObjective: "mid"}}}, "flow_control.tenants.t.max_objective"},
		{Config{Objectives: obj, Tenants: map[string]Tenant{"t": {Objective: "hi", MaxObjective: "lo"}}}, "is above max_objective"},
		{Config{Objectives: obj, DefaultTenant: Tenant{Objective: "zz"}}, "flow_control.default_tenant.objective"},
		{Config{Objectives: obj, Bands: map[string]BandLimits{"mid": {}}}, "flow_control.bands.mid"},
		{Config{Objectives: obj, Bands: map[string]BandLimits{"hi": {TTL: -time.Second}}}, "flow_control.bands.hi.ttl"},
		{Config{BandDefaults: BandLimits{MaxRequests: -1}}, "flow_control.band_defaults.max_requests"},
		{Config{MaxFlows: -1}, "flow_control.max_flows"},
		{Config{PromptWeight: -1}, "flow_control.prompt_weight"},
	} {
		_, err := NewPolicy(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPolicy(%+v) = %v; want error containing %q", tc.cfg, err, tc.want)
		}
	}
}

func TestBandLimits(t *testing.T) {
	p := testPolicy(t, Config{
		Objectives:   map[string]int{"hi": 5, "lo": 0},
		BandDefaults: BandLimits{MaxRequests: 7},
		Bands:        map[string]BandLimits{"hi": {TTL: time.Second}},
	})
	if got, want := p.Band(5), (BandLimits{MaxRequests: 7, MaxBytes: DefaultBandBytes, TTL: time.Second}); got != want {
		t.Errorf("Band(5) = %+v; want %+v", got, want)
	}
	if got, want := p.Band(0), (BandLimits{MaxRequests: 7, MaxBytes: DefaultBandBytes, TTL: DefaultTTL}); got != want {
		t.Errorf("Band(0) = %+v; want %+v", got, want)
	}
	if p.ObjectiveName(5) != "hi" || p.ObjectiveName(3) != "" {
		t.Errorf("ObjectiveName: %q %q", p.ObjectiveName(5), p.ObjectiveName(3))
	}
}
