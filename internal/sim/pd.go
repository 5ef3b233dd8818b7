package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/route"
)

// Prefill/decode disaggregation (--pd P:D): the fleet is P prefill and D
// decode replicas. A split request's prefill leg runs on a prefill replica
// (its prompt's KV held there, vllmsim's Request.HoldKV), and when it
// finishes the decode leg runs on a decode replica, importing the KV
// (Request.ImportTokens: the read takes the preset's transfer time) and
// streaming the answer; an aggregated request runs whole on its decode
// replica. Every engine runs chunked prefill (PDOptions.ChunkTokens), so a
// prefill beside decoding requests lengthens their steps: what splitting
// buys. The policies decide per request whether to split and where each
// leg goes; "aggregated" is the same P + D replicas all serving both legs.

// PDOptions configure a disaggregated run (Options.PD).
type PDOptions struct {
	// Prefill and Decode are the replica counts (--pd P:D); both 0 means
	// no disaggregation.
	Prefill, Decode int
	// ChunkTokens is every engine's chunked-prefill budget per step
	// (vllmsim.EngineConfig.PrefillChunkTokens); 0 means
	// DefaultPDChunkTokens.
	ChunkTokens int
	// Split is the cost model of the default policy's split decision
	// (route.Config's Split* fields); zero fields mean route's defaults.
	SplitInterference, SplitTransferWeight float64
	SplitMinTokens                         int
}

// DefaultPDChunkTokens is PDOptions.ChunkTokens when it is 0: vLLM's
// --max-num-batched-tokens default for its OpenAI server on a GPU of 80 GB
// such as the H100 of the workloads' presets.
const DefaultPDChunkTokens = 8192

// The disaggregation policies besides route.DefaultPolicy (see
// docs/simulation.md for their sources).
const (
	pdAlwaysSplitPolicy = "always-split"
	pdLLMDPolicy        = "llm-d-pd-decider"
	pdSMGPolicy         = "smg-pd"
	pdAggregatedPolicy  = "aggregated"
)

// PDPolicyNames are the policies of a disaggregated run, in report order:
// the default policy (its split decision), the peers, and aggregated.
var PDPolicyNames = []string{route.DefaultPolicy, pdAlwaysSplitPolicy, pdLLMDPolicy, pdSMGPolicy, pdAggregatedPolicy}

// pdRole is a disaggregation policy's role: the default policy and
// aggregated are what serve does; the others are references.
func pdRole(name string) string {
	if name == route.DefaultPolicy || name == pdAggregatedPolicy {
		return RoleRoute
	}
	return RolePeer
}

// ParsePD parses --pd P:D.
func ParsePD(s string) (prefill, decode int, err error) {
	a, b, ok := strings.Cut(s, ":")
	if ok {
		prefill, err = strconv.Atoi(strings.TrimSpace(a))
	}
	if ok && err == nil {
		decode, err = strconv.Atoi(strings.TrimSpace(b))
	}
	if !ok || err != nil || prefill < 1 || decode < 1 || prefill+decode > 1024 {
		return 0, 0, fmt.Errorf("%q is not P:D with P, D ≥ 1 prefill and decode replicas, at most 1024 in all", s)
	}
	return prefill, decode, nil
}

// checkPD reports options a disaggregated run does not support.
func (o Options) checkPD(w *Workload) error {
	switch {
	case o.PD.Prefill < 1 || o.PD.Decode < 1:
		return fmt.Errorf("sim: --pd %d:%d: both pools need a replica", o.PD.Prefill, o.PD.Decode)
	case len(o.Rates) > 0 || len(o.Scale) > 0 || o.Routers > 1 || o.LoadHintInterval > 0:
		return errors.New("sim: --pd runs one router without --rates, --scale, --routers or --load-hint")
	case w.Cores > 0:
		return fmt.Errorf("sim: --pd: workload %s shares CPU cores between replicas; disaggregation models GPU engines", w.Name)
	case o.PD.ChunkTokens < 0:
		return fmt.Errorf("sim: --pd chunk tokens %d is negative", o.PD.ChunkTokens)
	}
	for _, p := range o.Policies {
		if !slices.Contains(PDPolicyNames, p) {
			return fmt.Errorf("sim: --pd: unknown policy %q (have %s)", p, strings.Join(PDPolicyNames, ", "))
		}
	}
	return nil
}

// simulatePD runs every disaggregation policy of opts over w.
func simulatePD(w *Workload, opts Options) (*Report, error) {
	opts.Replicas = opts.PD.Prefill + opts.PD.Decode
	opts, err := opts.resolve(w)
	if err != nil {
		return nil, err
	}
	if err := opts.checkPD(w); err != nil {
		return nil, err
	}
	if err := prepare(w, opts.PrefixLength); err != nil {
		return nil, err
	}
	pols := opts.Policies
	if len(pols) == 0 {
		pols = PDPolicyNames
	}
	rep := newReport(w, opts, nil)
	rep.PD = fmt.Sprintf("%d:%d", opts.PD.Prefill, opts.PD.Decode)
	var done atomic.Int64
	progress := func() {
		if opts.Progress != nil {
			opts.Progress(int(done.Add(1)), len(w.Requests)*len(pols))
		}
	}
	rep.Policies = make([]PolicyResult, len(pols))
	errs := make([]error, len(pols))
	par := opts.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, p := range pols {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			pf, err := newPDFleet(w, opts, p, progress)
			if err == nil {
				rep.Policies[i], err = pf.run()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rep.VirtualSeconds = w.Requests[len(w.Requests)-1].At.Seconds()
	return rep, nil
}

// pdRouter routes both legs of the requests of one disaggregation policy.
type pdRouter interface {
	// route places fl: fl.replica is its decode replica (the only one when
	// aggregated) and fl.pre its prefill replica, -1 when not split; false
	// when every candidate is saturated.
	route(fl *pdFlight) bool
	// prefilled: fl's prefill leg finished with cached of prompt tokens
	// found in the prefill replica's cache.
	prefilled(fl *pdFlight, cached, prompt int)
	// firstToken: the decode (or only) leg's first token, cached of
	// prompt tokens cached or imported.
	firstToken(fl *pdFlight, cached, prompt int)
	// done: fl finished or failed.
	done(fl *pdFlight)
}

// pdFlight is one request of a disaggregated run.
type pdFlight struct {
	flight
	pre    int            // prefill replica, -1 when aggregated
	preDec route.Decision // the prefill pick (route policies)
	// preDone: the prefill leg finished (pdRouter.prefilled ran).
	preDone bool
}

// pdLeg is what an engine request id stands for.
type pdLeg struct {
	fl      *pdFlight
	prefill bool
}

// pdFleet is one disaggregation policy's run: the fleet's replicas (the
// prefill pool first, then the decode pool; aggregated: all serve both),
// one router, its queue.
type pdFleet struct {
	*fleet
	router          pdRouter
	prefill, decode []int
	legs            []map[vllmsim.RequestID]pdLeg
	queue           []*pdFlight
	evs             []vllmsim.Event

	itls        []float64
	splits      int
	placed      int
	transferred int64
}

func newPDFleet(w *Workload, opts Options, policy string, progress func()) (*pdFleet, error) {
	f := &fleet{w: w, opts: opts, policy: policy, progress: progress, first: -1,
		bucketC: make([]int64, hitBuckets), bucketP: make([]int64, hitBuckets), placedOn: map[*Request]int{},
		byRequest: make([]float64, len(w.Requests))}
	for i := range f.byRequest {
		f.byRequest[i] = math.NaN()
	}
	eng := w.Engine
	eng.PrefillChunkTokens = cmpOr(opts.PD.ChunkTokens, DefaultPDChunkTokens)
	for range opts.Replicas {
		e, err := vllmsim.NewEngine(eng)
		if err != nil {
			return nil, err
		}
		f.reps = append(f.reps, &replica{eng: e, flights: map[vllmsim.RequestID]*flight{}, active: true})
		f.inflight = append(f.inflight, 0)
		f.active = append(f.active, len(f.reps)-1)
	}
	pf := &pdFleet{fleet: f}
	for i := range opts.Replicas {
		pf.legs = append(pf.legs, map[vllmsim.RequestID]pdLeg{})
		if i < opts.PD.Prefill {
			pf.prefill = append(pf.prefill, i)
		} else {
			pf.decode = append(pf.decode, i)
		}
	}
	r, err := newPDRouter(pf, policy)
	if err != nil {
		return nil, err
	}
	pf.router = r
	return pf, nil
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// run simulates the workload to its last answer.
func (p *pdFleet) run() (PolicyResult, error) {
	start := time.Now()
	var starts []*Request
	for _, r := range p.w.Requests {
		if !r.follows {
			starts = append(starts, r)
		}
	}
	ai, n := 0, len(p.w.Requests)
	for p.finished+p.failed < n {
		ei, te := p.nextEngineEvent()
		areq, aat := p.nextArrival(starts, ai)
		ta := epoch.Add(aat)
		switch {
		case ei >= 0 && (areq == nil || !ta.Before(te)):
			p.engineEvents(ei, te)
		case areq != nil:
			if ai < len(starts) && areq == starts[ai] {
				ai++
			} else {
				p.turns.pop()
			}
			p.arrive(&pdFlight{flight: flight{req: areq, at: aat}, pre: -1}, ta)
		default:
			return PolicyResult{}, fmt.Errorf("sim: %s: %d requests stuck in the router's queue", p.policy, n-p.finished-p.failed)
		}
	}
	return p.result(time.Since(start)), nil
}

func (p *pdFleet) arrive(fl *pdFlight, now time.Time) {
	if p.first < 0 {
		p.first = fl.at
	}
	if len(p.queue) > 0 || !p.dispatch(fl, now) {
		if !fl.queued {
			fl.queued = true
			p.queued++
		}
		p.queue = append(p.queue, fl)
	}
}

// dispatch routes fl and submits its first leg at now; false when the
// router is saturated.
func (p *pdFleet) dispatch(fl *pdFlight, now time.Time) bool {
	fl.now = now
	if !p.router.route(fl) {
		return false
	}
	p.placed++
	p.reps[fl.replica].count++
	if _, ok := p.placedOn[fl.req]; !ok {
		p.placedOn[fl.req] = fl.replica
	}
	if fl.pre >= 0 {
		p.splits++
		p.submit(fl, fl.pre, true, 0, now)
	} else {
		p.submit(fl, fl.replica, false, 0, now)
	}
	return true
}

// submit sends a leg of fl to replica i at now: the prefill leg (one
// token, its KV held), or the decode leg importing imported tokens.
func (p *pdFleet) submit(fl *pdFlight, i int, prefill bool, imported int, now time.Time) {
	er := vllmsim.Request{Prompt: fl.prompt(), MaxTokens: fl.req.Output, ImportTokens: imported}
	if prefill {
		er.MaxTokens, er.HoldKV = 1, true
	}
	if p.w.Salted {
		er.CacheSalt = fl.req.Group
	}
	rep := p.reps[i]
	id, err := rep.eng.Submit(now, er)
	if err != nil {
		p.fail(fl, now)
		return
	}
	if !prefill {
		fl.tokens = nil // the engine holds the prompt now
	}
	p.legs[i][id] = pdLeg{fl: fl, prefill: prefill}
	p.setNext(rep, now, true) // Submit may have produced events at now
}

func (p *pdFleet) fail(fl *pdFlight, now time.Time) {
	p.router.done(fl)
	p.failed++
	p.progress()
	p.releaseNext(&fl.flight, now)
}

// engineEvents handles replica i's events up to now.
func (p *pdFleet) engineEvents(i int, now time.Time) {
	rep := p.reps[i]
	// Copied: a prefill leg's fetch calls the engine again.
	p.evs = append(p.evs[:0], rep.eng.Advance(now)...)
	for _, ev := range p.evs {
		leg, ok := p.legs[i][ev.ID]
		if !ok {
			continue
		}
		fl := leg.fl
		switch {
		case leg.prefill && ev.Kind == vllmsim.EventFirstToken:
			p.countHit(fl, ev)
			p.router.prefilled(fl, ev.CachedTokens, ev.PromptTokens)
			fl.preDone = true
		case leg.prefill && ev.Kind == vllmsim.EventFinished:
			delete(p.legs[i], ev.ID)
			held, err := rep.eng.Fetch(now, ev.ID)
			if err != nil {
				held = 0 // nothing to import: the decode leg computes the prompt
			}
			p.submit(fl, fl.replica, false, held, now)
		case ev.Kind == vllmsim.EventFirstToken:
			p.firstToken(fl, ev)
		case ev.Kind == vllmsim.EventFinished:
			delete(p.legs[i], ev.ID)
			p.finish(fl, ev)
		}
	}
	next, busy := rep.eng.NextEvent()
	p.setNext(rep, next, busy)
	p.drain(now)
}

// countHit counts the prompt tokens of the leg that computes the prompt
// and how many of them its replica had cached.
func (p *pdFleet) countHit(fl *pdFlight, ev vllmsim.Event) {
	p.cached += int64(ev.CachedTokens)
	p.prompt += int64(ev.PromptTokens)
	b := p.bucket(fl.at)
	p.bucketC[b] += int64(ev.CachedTokens)
	p.bucketP[b] += int64(ev.PromptTokens)
}

func (p *pdFleet) firstToken(fl *pdFlight, ev vllmsim.Event) {
	ttft := ev.FirstToken.Sub(epoch.Add(fl.at))
	p.ttfts = append(p.ttfts, float64(ttft)/1e6)
	p.byRequest[fl.req.index] = float64(ttft) / 1e6
	if ttft <= p.opts.SLO {
		p.good++
	}
	if fl.pre < 0 {
		p.countHit(fl, ev)
	}
	p.transferred += int64(ev.Transferred)
	p.router.firstToken(fl, ev.CachedTokens, ev.PromptTokens)
}

// finish ends fl: its inter-token latency is the mean gap between its
// output tokens after the first.
func (p *pdFleet) finish(fl *pdFlight, ev vllmsim.Event) {
	if ev.OutputTokens > 1 {
		p.itls = append(p.itls, float64(ev.Time.Sub(ev.FirstToken))/1e6/float64(ev.OutputTokens-1))
	}
	p.router.done(fl)
	p.finished++
	p.outTokens += int64(ev.OutputTokens)
	if ev.Time.After(p.lastFinish) {
		p.lastFinish = ev.Time
	}
	p.releaseNext(&fl.flight, ev.Time)
	p.progress()
}

// drain dispatches the router's queue in FIFO order while it has room.
func (p *pdFleet) drain(now time.Time) {
	k := 0
	for k < len(p.queue) && p.dispatch(p.queue[k], now) {
		p.queue[k] = nil
		k++
	}
	p.queue = p.queue[k:]
}

// result is fleet's result with the disaggregation figures.
func (p *pdFleet) result(elapsed time.Duration) PolicyResult {
	res := p.fleet.result(elapsed)
	res.Role = pdRole(p.policy)
	slices.Sort(p.itls)
	p50, p90 := quantile(p.itls, 0.5), quantile(p.itls, 0.9)
	share := 0.0
	if p.placed > 0 {
		share = float64(p.splits) / float64(p.placed)
	}
	tr := p.transferred
	res.ITLP50, res.ITLP90, res.SplitShare, res.TransferredTokens = &p50, &p90, &share, &tr
	return res
}

// writePDTable writes a disaggregated run's comparison.
func (r *Report) writePDTable(w io.Writer) error {
	rate := ""
	if r.Rate != 1 && r.Rate != 0 {
		rate = fmt.Sprintf(" at %g× the base rate", r.Rate)
	}
	fmt.Fprintf(w, "workload %s: %d requests over %.0f virtual s%s, --pd %s (aggregated: all %d replicas serve both)\n\n",
		r.Workload, r.Requests, r.VirtualSeconds, rate, r.PD, r.Replicas)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trole\tsplit\thit\tTTFT p50 ms\tp90 ms\tp99 ms\tITL p50 ms\tp90 ms\ttransferred tok\tout tok/s\tgoodput\tqueued\tfailed\t")
	for _, p := range r.Policies {
		name := p.Name
		if name == r.DefaultPolicy {
			name += " (default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%.1f%%\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%d\t%.0f\t%.1f%%\t%d\t%d\t\n",
			name, p.Role, 100*deref(p.SplitShare), 100*p.HitRate, p.TTFT.P50, p.TTFT.P90, p.TTFT.P99, deref(p.ITLP50), deref(p.ITLP90),
			derefInt(p.TransferredTokens), p.OutputTokensPerSec, 100*p.Goodput, p.Queued, p.Failed)
	}
	return tw.Flush()
}

func deref(x *float64) float64 {
	if x == nil {
		return 0
	}
	return *x
}

func derefInt(x *int64) int64 {
	if x == nil {
		return 0
	}
	return *x
}
