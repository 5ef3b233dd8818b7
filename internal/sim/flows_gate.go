package sim

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/route"
)

// flowGate is a flow-control variant: it sits in front of the fleet's
// router, decides when each arriving request goes on to it (fleet.route)
// and which it refuses, and what priority the engines see.
type flowGate interface {
	// arrive sees a request arrive at now.
	arrive(fl *flight, now time.Time)
	// wake says capacity may have changed at now (an engine event).
	wake(now time.Time)
	// next is the gate's next timer, if any; timer runs it.
	next() (time.Time, bool)
	timer(now time.Time)
	// enginePriority is the priority field sent to the engine with fl.
	enginePriority(fl *flight) int
	// firstToken and finished see fl's first token and its end.
	firstToken(fl *flight, at time.Time)
	finished(fl *flight, at time.Time, outputTokens int)
}

// gateBuilders make each variant's gate over fleet f.
var gateBuilders = map[string]func(f *fleet) (flowGate, error){
	VariantPrefixgate: newPrefixgateGate,
	VariantFCFS:       func(f *fleet) (flowGate, error) { return &fcfsGate{gateLog: newGateLog(f)}, nil },
	VariantGIE:        newGIEGate,
	VariantSMG:        newSMGGate,
}

// flowVariants are the variants to run on w: none without flows.
func flowVariants(w *Workload, opts Options) []string {
	if !hasFlows(w) {
		return nil
	}
	if len(opts.Variants) > 0 {
		return opts.Variants
	}
	return FlowVariants
}

// CheckVariants checks variant names.
func CheckVariants(names []string) error {
	for _, v := range names {
		if !slices.Contains(FlowVariants, v) {
			return fmt.Errorf("sim: unknown flow-control variant %q (have %v)", v, FlowVariants)
		}
	}
	return nil
}

// runVariants runs every variant over w with the default routing policy,
// holding sem while each runs.
func runVariants(w *Workload, opts Options, variants []string, scale []scaleAt, progress func(), sem chan struct{}) ([]FlowVariant, error) {
	if err := CheckVariants(variants); err != nil {
		return nil, err
	}
	out := make([]FlowVariant, len(variants))
	errs := make([]error, len(variants))
	var wg sync.WaitGroup
	for i, v := range variants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = runVariant(w, opts, v, scale, progress)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runVariant(w *Workload, opts Options, name string, scale []scaleAt, progress func()) (FlowVariant, error) {
	f, err := newFleet(w, opts, route.DefaultPolicy, scale, progress)
	if err != nil {
		return FlowVariant{}, err
	}
	if f.gate, err = gateBuilders[name](f); err != nil {
		return FlowVariant{}, err
	}
	res, err := f.run()
	if err != nil {
		return FlowVariant{}, fmt.Errorf("%s: %w", name, err)
	}
	v := FlowVariant{Name: name, Role: variantRole(name), OutputTokensPerSec: res.OutputTokensPerSec, HitRate: res.HitRate}
	l := f.gate.(interface{ log() *flowLog }).log()
	v.Flows = l.flowResults(w, res.RequestTTFTs)
	v.Held, v.Replicas, v.TTFTs = l.held, l.replica, res.RequestTTFTs
	for _, r := range f.reps {
		v.Preempted += r.eng.Stats().Preemptions
	}
	return v, nil
}

// gateLog is what every gate records, and its view of the fleet.
type gateLog struct {
	f   *fleet
	l   *flowLog
	now time.Time // the latest time the gate was told of
}

// at records now as the gate's time.
func (g *gateLog) at(now time.Time) {
	if now.After(g.now) {
		g.now = now
	}
}

// later is t, or the gate's time if t is before it: a timer never runs
// in the past.
func (g *gateLog) later(t time.Time) time.Time {
	if t.Before(g.now) {
		return g.now
	}
	return t
}

func newGateLog(f *fleet) gateLog { return gateLog{f: f, l: newFlowLog(len(f.w.Requests))} }

func (g *gateLog) log() *flowLog { return g.l }

func (g *gateLog) firstToken(fl *flight, at time.Time) {
	g.l.first[fl.req.index] = at.Sub(epoch)
	g.l.replica[fl.req.index] = fl.replica
}

func (g *gateLog) finished(fl *flight, at time.Time, _ int) {
	g.l.finish[fl.req.index] = at.Sub(epoch)
}

// shed refuses fl: it counts as failed and is answered at once.
func (g *gateLog) shed(fl *flight, now time.Time) {
	g.l.shed[fl.req.index] = true
	g.f.failed++
	g.f.progress()
	g.f.releaseNext(fl, now)
}

// cancel takes fl, dispatched and before its first token, off its
// replica (a preemption by the gateway); it is then shed.
func (g *gateLog) cancel(fl *flight, now time.Time) {
	f := g.f
	rep := f.reps[fl.replica]
	rep.eng.Cancel(f.engineTime(rep, now), fl.engID)
	delete(rep.flights, fl.engID)
	f.release(fl)
	wasBusy := rep.busy
	next, busy := rep.eng.NextEvent()
	f.setNext(rep, next, busy)
	if busy != wasBusy {
		f.reclock(now)
	}
	g.shed(fl, now)
}

// enginePriority is vLLM's spelling of fl's priority (lower first) when
// the replicas schedule by priority, else 0 (vLLM refuses a priority it
// would ignore).
func (g *gateLog) enginePriority(fl *flight) int {
	if g.f.w.Engine.SchedulingPolicy == vllmsim.SchedulingPriority {
		return -fl.req.Priority
	}
	return 0
}

// fcfsGate is today's behaviour: no flow control in the router; every
// request goes on at once, the engines queue, and no priority is sent.
type fcfsGate struct{ gateLog }

func (g *fcfsGate) arrive(fl *flight, now time.Time) { g.f.route(fl, now) }
func (g *fcfsGate) wake(time.Time)                   {}
func (g *fcfsGate) next() (time.Time, bool)          { return time.Time{}, false }
func (g *fcfsGate) timer(time.Time)                  {}
func (g *fcfsGate) enginePriority(*flight) int       { return 0 }
