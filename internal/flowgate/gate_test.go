package flowgate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/route"
)

// newGate is a gate over a real router of two members that each take one
// request at a time.
func newGate(t *testing.T, cfg Config) (*Gate, *prometheus.Registry) {
	t.Helper()
	rt, err := route.New(route.Config{Policy: "least-outstanding"}, []route.Member{{Name: "a", Threshold: 1}, {Name: "b", Threshold: 1}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	g, err := New(cfg, rt, nil, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return g, reg
}

var objectives = map[string]string{"interactive": "10", "standard": "0", "batch": "-1"}

type pickOut struct {
	d   route.Decision
	adm Admission
	err error
}

func acquire(g *Gate, ctx context.Context, id string, prio int) chan pickOut {
	out := make(chan pickOut, 1)
	go func() {
		d, adm, err := g.Acquire(ctx, flowcontrol.Flow{FairnessID: id, Priority: prio}, route.Request{Key: 1, PromptTokens: 10}, 100)
		out <- pickOut{d, adm, err}
	}()
	return out
}

// queuedCount waits until n requests are queued.
func queuedCount(t *testing.T, g *Gate, n int) {
	t.Helper()
	for range 2000 {
		g.mu.Lock()
		q := g.queued
		g.mu.Unlock()
		if q == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("never %d queued", n)
}

func TestPriorityOrderAndShedding(t *testing.T) {
	g, reg := newGate(t, Config{Objectives: objectives})
	ctx := context.Background()
	first, second := <-acquire(g, ctx, "x", 0), <-acquire(g, ctx, "x", 0)
	if first.err != nil || second.err != nil || first.adm.Queued {
		t.Fatalf("below saturation: %v %v %+v", first.err, second.err, first.adm)
	}
	low := acquire(g, ctx, "flood", 0)
	queuedCount(t, g, 1)
	high := acquire(g, ctx, "chat", 10)
	queuedCount(t, g, 2)
	shed := <-acquire(g, ctx, "bulk", -1)
	var pe *pipeline.Error
	if !errors.As(shed.err, &pe) || pe.Status != http.StatusTooManyRequests || pe.RetryAfter <= 0 || !strings.Contains(pe.Message, "sheddable") {
		t.Fatalf("sheddable while saturated: %v", shed.err)
	}
	first.d.Done()
	h := <-high
	if h.err != nil || !h.adm.Queued || h.adm.Position.AheadHigher != 0 {
		t.Fatalf("high: %v %+v", h.err, h.adm)
	}
	select {
	case <-low:
		t.Fatal("the lower band went before a backend was free")
	default:
	}
	second.d.Done()
	if l := <-low; l.err != nil {
		t.Fatal(l.err)
	} else {
		l.d.Done()
	}
	h.d.Done()
	if got := metricValue(t, reg, "prefixgate_flow_shed_total", "bulk"); got != 1 {
		t.Errorf("shed metric %v", got)
	}
	if got := metricValue(t, reg, "prefixgate_flow_dispatched_total", "flood"); got != 1 {
		t.Errorf("dispatched %v", got)
	}
}

func TestCancelLeavesQueue(t *testing.T) {
	g, _ := newGate(t, Config{})
	ctx := context.Background()
	a, b := <-acquire(g, ctx, "x", 0), <-acquire(g, ctx, "x", 0)
	cctx, cancel := context.WithCancel(ctx)
	gone := acquire(g, cctx, "y", 0)
	queuedCount(t, g, 1)
	cancel()
	if r := <-gone; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("canceled: %v", r.err)
	}
	queuedCount(t, g, 0)
	a.d.Done()
	b.d.Done()
	if c := <-acquire(g, ctx, "z", 0); c.err != nil || c.adm.Queued {
		t.Fatalf("after cancel: %v %+v", c.err, c.adm)
	}
}

func TestTTLAnswers429(t *testing.T) {
	g, _ := newGate(t, Config{TTL: 20 * time.Millisecond})
	ctx := context.Background()
	a, b := <-acquire(g, ctx, "x", 0), <-acquire(g, ctx, "x", 0)
	r := <-acquire(g, ctx, "y", 0)
	var pe *pipeline.Error
	if !errors.As(r.err, &pe) || pe.Status != 429 || pe.Code != "flow_control_ttl" {
		t.Fatalf("ttl: %v", r.err)
	}
	a.d.Done()
	b.d.Done()
}

func TestIdentify(t *testing.T) {
	g, _ := newGate(t, Config{Objectives: objectives, TenantObjectives: map[string]string{"acme": "interactive", "beta": "batch"},
		TenantMaxObjectives: map[string]string{"acme": "interactive"}, MaxObjective: "standard", FairnessHeader: "x-team"})
	for _, tc := range []struct {
		h             http.Header
		tenant, group string
		want          Identity
	}{
		{http.Header{}, "", "", Identity{Flow: flowcontrol.Flow{FairnessID: "default"}, Objective: "standard"}},
		{http.Header{}, "", "g1", Identity{Flow: flowcontrol.Flow{FairnessID: "g1"}, Objective: "standard"}},
		{http.Header{"X-Team": {"t"}}, "", "g1", Identity{Flow: flowcontrol.Flow{FairnessID: "t"}, Objective: "standard"}},
		{http.Header{"X-Team": {"t"}, GatewayFairnessHeader: {"gw"}}, "", "", Identity{Flow: flowcontrol.Flow{FairnessID: "gw"}, Objective: "standard"}},
		{http.Header{FairnessHeader: {"ll"}, GatewayFairnessHeader: {"gw"}}, "acme", "", Identity{Flow: flowcontrol.Flow{FairnessID: "acme", Priority: 10}, Objective: "interactive"}},
		{http.Header{ObjectiveHeader: {"batch"}}, "acme", "", Identity{Flow: flowcontrol.Flow{FairnessID: "acme", Priority: -1}, Objective: "batch"}},
		{http.Header{GatewayObjectiveHeader: {"interactive"}}, "", "", Identity{Flow: flowcontrol.Flow{FairnessID: "default"}, Objective: "interactive", Capped: true}},
		{http.Header{}, "beta", "", Identity{Flow: flowcontrol.Flow{FairnessID: "beta", Priority: -1}, Objective: "batch"}},
		{http.Header{ObjectiveHeader: {"interactive"}}, "beta", "", Identity{Flow: flowcontrol.Flow{FairnessID: "beta"}, Objective: "interactive", Capped: true}},
	} {
		got, err := g.Identify(tc.h, tc.tenant, tc.group)
		if err != nil || got != tc.want {
			t.Errorf("Identify(%v, %q, %q) = %+v, %v; want %+v", tc.h, tc.tenant, tc.group, got, err, tc.want)
		}
	}
	_, err := g.Identify(http.Header{ObjectiveHeader: {"urgent"}}, "", "")
	var pe *pipeline.Error
	if !errors.As(err, &pe) || pe.Status != 400 || pe.Param != ObjectiveHeader || !strings.Contains(pe.Message, `"urgent"`) {
		t.Errorf("unknown objective: %v", err)
	}
	_, err = g.Identify(http.Header{FairnessHeader: {strings.Repeat("x", 200)}}, "", "")
	if !errors.As(err, &pe) || pe.Status != 400 || pe.Param != FairnessHeader {
		t.Errorf("long fairness id: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Objectives: map[string]string{"x": "high"}}, "flow_control.objectives.x"},
		{Config{Objectives: map[string]string{"x": "1"}, BandTTLs: map[string]string{"x": "soon"}}, "flow_control.band_ttls.x"},
		{Config{FairnessHeader: "a b"}, "flow_control.fairness_header"},
		{Config{EnginePriorityField: "pri-ority"}, "flow_control.engine_priority_field"},
		{Config{MetricFlows: -1}, "flow_control.metric_flows"},
		{Config{TenantObjectives: map[string]string{"t": "nope"}}, `flow_control.tenant_objectives.t: flowcontrol: unknown objective "nope"`},
		{Config{Objectives: objectives, TenantMaxObjectives: map[string]string{"t": "nope"}}, "flow_control.tenant_max_objectives.t"},
		{Config{Objectives: objectives, MaxObjective: "nope"}, "flow_control.max_objective"},
		{Config{Objectives: objectives, BandTTLs: map[string]string{"nope": "5s"}}, "flow_control.band_ttls.nope: flowcontrol: unknown objective"},
		{Config{Objectives: objectives, TenantObjectives: map[string]string{"t": "interactive"}, TenantMaxObjectives: map[string]string{"t": "standard"}},
			"flow_control.tenant_objectives.t: objective \"interactive\""},
		{Config{Objectives: objectives, DefaultObjective: "interactive", MaxObjective: "batch"}, "flow_control.default_objective"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v; want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestWithPriority(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"model":"m"}`, `{"model":"m","priority":-10}`},
		{`{}`, `{"priority":-10}`},
		{` { "a" : 1 } `, ` { "a" : 1 ,"priority":-10} `},
	} {
		got, ok := WithPriority([]byte(tc.in), "priority", -10)
		if !ok || string(got) != tc.want {
			t.Errorf("WithPriority(%s) = %s", tc.in, got)
		}
	}
	if _, ok := WithPriority([]byte(`[1]`), "priority", 1); ok {
		t.Error("an array took a field")
	}
}

// metricValue sums the samples of family name whose flow label is flow.
func metricValue(t *testing.T, reg *prometheus.Registry, name, flow string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "flow" && l.GetValue() == flow {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// An engine that queues five while running two has a capacity of two:
// further requests wait in the gate, except, when priorities are sent to
// an engine that takes them, those of the highest active band.
func TestLearnedCapacityAndOvertaking(t *testing.T) {
	for _, send := range []bool{false, true} {
		rt, err := route.New(route.Config{Policy: "least-outstanding"}, []route.Member{{Name: "a", Threshold: 100}})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		signals := func(route.Target) Scrape {
			return Scrape{Known: true, At: at, Running: 2, Waiting: 5, TakesPriority: true}
		}
		g, err := New(Config{Objectives: objectives, EnginePriority: send}, rt, signals, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		a, b := <-acquire(g, ctx, "x", 0), <-acquire(g, ctx, "x", 0)
		if a.err != nil || b.err != nil {
			t.Fatal(a.err, b.err)
		}
		low := acquire(g, ctx, "x", 0)
		queuedCount(t, g, 1)
		high := acquire(g, ctx, "y", 10)
		if send {
			if h := <-high; h.err != nil {
				t.Errorf("the top band to a priority engine waited: %v %+v", h.err, h.adm)
			} else {
				h.d.Done()
			}
		} else {
			queuedCount(t, g, 2)
		}
		a.d.Done()
		if !send {
			if h := <-high; h.err != nil {
				t.Fatal(h.err)
			} else {
				h.d.Done()
			}
		}
		b.d.Done()
		if l := <-low; l.err != nil {
			t.Fatal(l.err)
		} else {
			l.d.Done()
		}
	}
}

// With max_queued_tokens, a member whose predicted prefill work (the
// prefix-index policy's charge until the first byte) reaches the bound is
// full: the next request waits until the first answer begins.
func TestQueuedTokensBound(t *testing.T) {
	rt, err := route.New(route.Config{}, []route.Member{{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{MaxQueuedTokens: 1000}, rt, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := route.Request{Key: 7, Blocks: []uint64{1, 2, 3}, PromptTokens: 4000}
	first, _, err := g.Acquire(ctx, flowcontrol.Flow{FairnessID: "x"}, req, 10)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan error, 1)
	go func() {
		d, adm, err := g.Acquire(ctx, flowcontrol.Flow{FairnessID: "y"}, req, 10)
		if err == nil && !adm.Queued {
			err = errors.New("not queued behind 4,000 predicted tokens")
		}
		d.Done()
		out <- err
	}()
	queuedCount(t, g, 1)
	first.Report(route.Outcome{FirstByte: true})
	if err := <-out; err != nil {
		t.Fatal(err)
	}
	first.Done()
}

// TestPrefillHeadroom: while a higher band is active, a member whose
// prefill work queued (prefix-index's charge, released at the answer's
// first byte) reaches flow_control.headroom_prefill_tokens takes no
// request of a lower band; the higher band still goes, and the lower one
// goes once the first byte comes. With no higher band active the bound
// does not apply.
func TestPrefillHeadroom(t *testing.T) {
	rt, err := route.New(route.Config{Policy: "prefix-index"}, []route.Member{{Name: "a", Threshold: 64}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Objectives: objectives, HeadroomPrefillTokens: 1000}, rt, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prompt := func(key uint64, tokens int) route.Request {
		return route.Request{Key: key, PromptTokens: tokens, Blocks: []uint64{key<<8 | 1, key<<8 | 2}}
	}
	get := func(id string, prio int, req route.Request) chan pickOut {
		out := make(chan pickOut, 1)
		go func() {
			d, adm, err := g.Acquire(ctx, flowcontrol.Flow{FairnessID: id, Priority: prio}, req, 100)
			out <- pickOut{d, adm, err}
		}()
		return out
	}
	// No higher band yet: two long prompts go at once.
	p1, p2 := <-get("flood", 0, prompt(7, 6000)), <-get("flood", 0, prompt(8, 6000))
	if p1.err != nil || p2.err != nil || p1.adm.Queued || p2.adm.Queued {
		t.Fatalf("no higher band: %v %v %+v %+v", p1.err, p2.err, p1.adm, p2.adm)
	}
	chat := <-get("chat", 10, prompt(9, 60))
	if chat.err != nil || chat.adm.Queued {
		t.Fatalf("the higher band waited: %v %+v", chat.err, chat.adm)
	}
	low := get("flood", 0, prompt(10, 6000))
	queuedCount(t, g, 1)
	p1.d.Report(route.Outcome{FirstByte: true})
	g.Wake()
	select {
	case r := <-low:
		t.Fatalf("went with 6,000 prefill tokens still queued: %+v", r.adm)
	case <-time.After(20 * time.Millisecond):
	}
	p2.d.Report(route.Outcome{FirstByte: true})
	g.Wake()
	r := <-low
	if r.err != nil || !r.adm.Queued {
		t.Fatalf("after the first bytes: %v %+v", r.err, r.adm)
	}
	for _, d := range []route.Decision{p1.d, p2.d, chat.d, r.d} {
		d.Done()
	}
}

// TestShortPromptLane: while short prompts are active, a long prompt
// waits when all but one of eight members are prefilling a long one, a
// short prompt still goes at once, and the long one goes when a first
// byte frees a member.
func TestShortPromptLane(t *testing.T) {
	var ms []route.Member
	for i := range 8 {
		ms = append(ms, route.Member{Name: fmt.Sprintf("m%d", i), Threshold: 64})
	}
	rt, err := route.New(route.Config{Policy: "prefix-index"}, ms)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{HeadroomPrefillTokens: 1000}, rt, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := func(key uint64, tokens int) chan pickOut {
		out := make(chan pickOut, 1)
		go func() {
			req := route.Request{Key: key, PromptTokens: tokens, Blocks: []uint64{key<<8 | 1, key<<8 | 2}}
			d, adm, err := g.Acquire(ctx, flowcontrol.Flow{FairnessID: "t"}, req, 100)
			out <- pickOut{d, adm, err}
		}()
		return out
	}
	var longs []route.Decision
	for i := range 8 { // no short prompt seen yet: every member may take one
		r := <-get(uint64(100+i), 2000)
		if r.err != nil || r.adm.Queued {
			t.Fatalf("long prompt %d before any short one: %v %+v", i, r.err, r.adm)
		}
		longs = append(longs, r.d)
	}
	longs[7].Report(route.Outcome{FirstByte: true}) // seven members busy
	short := <-get(1, 100)
	if short.err != nil || short.adm.Queued {
		t.Fatalf("short prompt: %v %+v", short.err, short.adm)
	}
	held := get(200, 2000)
	queuedCount(t, g, 1)
	longs[0].Report(route.Outcome{FirstByte: true})
	g.Wake()
	r := <-held
	if r.err != nil || !r.adm.Queued {
		t.Fatalf("the held long prompt: %v %+v", r.err, r.adm)
	}
	for _, d := range append(longs, short.d, r.d) {
		d.Done()
	}
}

// TestProbeCapacity: a member whose engine publishes load but whose
// capacity is not known yet takes MinProbeStep requests, then holds the
// next and asks for a fresh scrape; a scrape that shows them all running
// with nothing waiting lets more go, in steps.
func TestProbeCapacity(t *testing.T) {
	rt, err := route.New(route.Config{Policy: "least-outstanding"}, []route.Member{{Name: "a", Threshold: 64}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	scrape := Scrape{Known: true, At: time.Now()}
	asked := 0
	signals := func(route.Target) Scrape { mu.Lock(); defer mu.Unlock(); return scrape }
	g, err := New(Config{}, rt, signals, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	g.SetRescrape(func(route.Target) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		scrape = Scrape{Known: true, At: scrape.At.Add(time.Second), Running: running}
	})
	ctx := context.Background()
	var held []route.Decision
	for i := range MinProbeStep {
		r := <-acquire(g, ctx, "x", 0)
		if r.err != nil || r.adm.Queued {
			t.Fatalf("request %d of the first step: %v %+v", i, r.err, r.adm)
		}
		held = append(held, r.d)
	}
	next := acquire(g, ctx, "x", 0)
	queuedCount(t, g, 1)
	mu.Lock()
	running = MinProbeStep // the scrape asked for shows them all running
	mu.Unlock()
	r := <-next
	if r.err != nil || !r.adm.Queued {
		t.Fatalf("after the confirming scrape: %v %+v", r.err, r.adm)
	}
	held = append(held, r.d)
	mu.Lock()
	if asked == 0 {
		t.Error("no fresh scrape was asked for")
	}
	mu.Unlock()
	for _, d := range held {
		d.Done()
	}
}

// TestFullBandEvicts: a band at max_queued_requests takes a light flow's
// arrival by refusing the newest request of the flow with the most queued
// (429 with Retry-After, reason evicted); the light request waits and is
// served.
func TestFullBandEvicts(t *testing.T) {
	g, reg := newGate(t, Config{MaxQueuedRequests: 3})
	ctx := context.Background()
	a, b := <-acquire(g, ctx, "x", 0), <-acquire(g, ctx, "x", 0)
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	var flood []chan pickOut
	for i := range 3 {
		flood = append(flood, acquire(g, ctx, "flood", 0))
		queuedCount(t, g, i+1)
	}
	light := acquire(g, ctx, "light", 0)
	r := <-flood[2]
	var pe *pipeline.Error
	if !errors.As(r.err, &pe) || pe.Status != http.StatusTooManyRequests || pe.RetryAfter <= 0 || pe.Code != "flow_control_evicted" {
		t.Fatalf("the flood's newest request: %v, want a 429 evicted", r.err)
	}
	queuedCount(t, g, 3)
	if got := metricValue(t, reg, "prefixgate_flow_shed_total", "flood"); got != 1 {
		t.Errorf("shed metric of the flood %v, want 1", got)
	}
	a.d.Done()
	b.d.Done()
	served := make(chan pickOut, 3)
	for _, ch := range []chan pickOut{flood[0], flood[1], light} {
		go func() {
			r := <-ch
			if r.err == nil {
				r.d.Done()
			}
			served <- r
		}()
	}
	for range 3 {
		if r := <-served; r.err != nil || !r.adm.Queued {
			t.Fatalf("a queued request: %v %+v", r.err, r.adm)
		}
	}
}

// TestHeldByHeadroomWaits: a sheddable request held back only by the
// headroom kept for active higher bands, while the member could still run
// it, waits instead of being refused, and goes once a slot frees.
func TestHeldByHeadroomWaits(t *testing.T) {
	rt, err := route.New(route.Config{Policy: "least-outstanding"}, []route.Member{{Name: "a", Threshold: 8}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Objectives: objectives}, rt, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var running []route.Decision
	for i, prio := range []int{10, 0, 0, 0, 0, 0} {
		r := <-acquire(g, ctx, "x", prio)
		if r.err != nil || r.adm.Queued {
			t.Fatalf("request %d: %v %+v", i, r.err, r.adm)
		}
		running = append(running, r.d)
	}
	// Six of eight run; two are kept for the interactive and standard
	// bands above batch.
	batch := acquire(g, ctx, "bulk", -1)
	queuedCount(t, g, 1)
	if ex := g.Explain(Identity{Flow: flowcontrol.Flow{FairnessID: "bulk", Priority: -1}}, route.Request{Key: 1}); !ex.Saturated {
		t.Error("Explain: a batch request would go now")
	}
	running[5].Done()
	r := <-batch
	if r.err != nil || !r.adm.Queued {
		t.Fatalf("held batch request: %v %+v", r.err, r.adm)
	}
	r.d.Done()
	for _, d := range running[:5] {
		d.Done()
	}
}
