package sim

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/route"
)

// Options configure a simulation run.
type Options struct {
	// Workload is a name from Workloads or "trace:FILE".
	Workload string
	// Requests is the number of requests (0: 20,000; for a trace, all).
	Requests int
	// Seed makes the run reproducible; 0 means 1.
	Seed uint64
	// Replicas overrides the workload's fleet size.
	Replicas int
	// Policies to compare; empty means PolicyNames.
	Policies []string
	// Scale events (see ParseScale).
	Scale []ScaleEvent
	// Routers is the number of independent routers (0 means 1).
	Routers int
	// LoadHintInterval, if positive, gives every router the fleet's true
	// per-replica in-flight counts (route.Router.SetLoadHint) every interval
	// of virtual time, as a server does from scraped replica metrics; 0 means
	// each router counts only its own requests.
	LoadHintInterval time.Duration
	// NoSpillChain disables the spill chain (route.Config.DisableSpillChain).
	NoSpillChain bool
	// PrefixLength is the routing window N; 0 means normalize's default.
	PrefixLength int
	// Threshold is each replica's concurrency threshold; 0 means route's.
	Threshold int
	// LoadFactor is c of the bounded-load ring; 0 means route's 1.25.
	LoadFactor float64
	// Slack is route.Config.Slack: the bound is at least the mean plus
	// Slack. 0 means route's default for the policy (3; prefix-index 12),
	// negative none.
	Slack int
	// DecodeWeight is route.Config.DecodeWeight (prefix-index); 0 means
	// route's default.
	DecodeWeight int
	// NoAnswers keeps prefix-index from learning answers (for measuring
	// what learning them gains).
	NoAnswers bool
	// Progress, if set, is called with finished and total request counts
	// over all policies; it may be called from several goroutines.
	Progress func(done, total int)
	// Parallel is how many policies run at once; 0 means GOMAXPROCS.
	Parallel int
	// Rate multiplies the workload's arrival rate (see BuildWorkloadRate);
	// 0 means 1.
	Rate float64
	// Rates, if set, runs the whole comparison once per rate multiplier
	// (RunSweep); Rate is then ignored.
	Rates []float64
	// SLO is the TTFT objective of goodput and the sustainable rate; 0
	// means DefaultSLO.
	SLO time.Duration
	// PD, with Prefill and Decode set, runs a disaggregated fleet (pd.go):
	// Policies are then PDPolicyNames.
	PD PDOptions
	// Flows keeps only the requests of these fairness ids (flows.go).
	Flows []string
	// EngineScheduling overrides the replicas' scheduling policy
	// (vllmsim.SchedulingFCFS or SchedulingPriority); "" keeps the
	// workload's.
	EngineScheduling string
	// Variants are the flow-control variants to run on a workload with
	// flows; empty means FlowVariants.
	Variants []string
	// FlowControl is the prefixgate variant's flow_control section; the
	// zero value is serve's defaults, and Objectives, when empty, are the
	// workload's bands.
	FlowControl flowgate.Config
}

// DefaultRequests is the request count when Options.Requests is 0.
const DefaultRequests = 20000

// DefaultSLO is the TTFT objective when Options.SLO is 0.
const DefaultSLO = 2 * time.Second

// Report is the outcome of a run; its JSON form is the --json output.
type Report struct {
	Workload       string         `json:"workload"`
	Replicas       int            `json:"replicas"`
	Requests       int            `json:"requests"`
	PooledBoundHit float64        `json:"pooled_bound_hit_rate"`
	Policies       []PolicyResult `json:"policies"`
	// DefaultPolicy is the policy serve uses when none is configured
	// (route.DefaultPolicy).
	DefaultPolicy string `json:"default_policy"`
	// Rate is the arrival-rate multiplier of Policies' run.
	Rate float64 `json:"rate"`
	// SLO is the TTFT objective of goodput and the sustainable rate, ms.
	SLO float64 `json:"slo_ms"`
	// PD is "P:D" for a disaggregated run (Options.PD), else empty.
	PD string `json:"pd,omitempty"`
	// Sweep and SustainableRate are set by a sweep (Options.Rates).
	Sweep           []SweepPoint        `json:"sweep,omitempty"`
	SustainableRate map[string]*float64 `json:"sustainable_rate,omitempty"`
	// FlowControl is one entry per flow-control variant when the workload
	// has flows (flows.go).
	FlowControl []FlowVariant `json:"flow_control,omitempty"`
	// EngineScheduling is the replicas' scheduling policy.
	EngineScheduling string `json:"-"`

	Routers           int           `json:"-"`
	LoadHintInterval  time.Duration `json:"-"`
	SpillChain        bool          `json:"-"`
	Note              string        `json:"-"`
	ScaleTimes        []float64     `json:"-"` // virtual seconds of scale events
	ScaleLabels       []string      `json:"-"`
	VirtualSeconds    float64       `json:"-"`
	SimulatedRequests int           `json:"-"`
}

// Percentiles of a distribution, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// PolicyResult is one policy's outcome.
type PolicyResult struct {
	Name string `json:"name"`
	// HitRate is cached prompt tokens / prompt tokens.
	HitRate float64     `json:"hit_rate"`
	TTFT    Percentiles `json:"ttft_ms"`
	// Throughput is finished requests per virtual second, from the first
	// arrival to the last completion.
	Throughput float64 `json:"throughput_rps"`
	// Share is each replica's fraction of requests, by replica index.
	Share []float64 `json:"share"`
	// MaxShareRatio is the largest share × the number of replicas.
	MaxShareRatio float64 `json:"max_share_ratio"`
	// SpillRate is the fraction of requests not placed at their key's home
	// (ring policies) or placed by the balance rule (sglang-cache-aware).
	SpillRate float64 `json:"spill_rate"`
	// MaxInflightOverBound is the largest excess of a replica's fleet-wide
	// in-flight count over the bound, ceil(c·total/n) (or ceil(total/n) +
	// slack if larger), seen right after a pick.
	MaxInflightOverBound int `json:"max_inflight_over_bound"`
	// KeysMovedFraction is the largest share of distinct keys whose home
	// changed at a scale event (ring policies; null for the others).
	KeysMovedFraction *float64 `json:"keys_moved_fraction"`
	// SameReplicaTurns is the fraction of later turns (requests carrying
	// an earlier request's answer) placed on the previous turn's replica;
	// null when the workload has none.
	SameReplicaTurns *float64 `json:"later_turns_on_previous_replica"`

	// Role is "route" (a policy serve accepts), "peer" (a reference
	// implementation of another router), "oracle" or "replay" (a recorded
	// run's placement, ReplayPolicy).
	Role string `json:"role"`
	// OutputTokensPerSec is generated tokens per virtual second over the
	// same span as Throughput.
	OutputTokensPerSec float64 `json:"output_tokens_per_s"`
	// Goodput is the fraction of requests whose TTFT is within the SLO
	// (failed requests count against it); GoodputRate is that fraction of
	// Throughput.
	Goodput     float64 `json:"goodput"`
	GoodputRate float64 `json:"goodput_rps"`
	// A disaggregated run's (Options.PD): the inter-token latency
	// percentiles (each request's mean gap between output tokens after
	// the first, ms), the share of requests split, and the prompt tokens
	// decode replicas read from prefill replicas.
	ITLP50            *float64 `json:"itl_p50_ms,omitempty"`
	ITLP90            *float64 `json:"itl_p90_ms,omitempty"`
	SplitShare        *float64 `json:"split_share,omitempty"`
	TransferredTokens *int64   `json:"transferred_tokens,omitempty"`

	Failed int       `json:"-"`
	Queued int       `json:"-"` // requests that waited in a router queue
	TTFTs  []float64 `json:"-"` // sorted, ms
	// RequestTTFTs is each request's TTFT in ms, in the workload's order
	// (NaN for one that failed): a replay compares it with the recorded
	// request's.
	RequestTTFTs []float64     `json:"-"`
	HitSeries    []float64     `json:"-"` // hit rate per time bucket (NaN when empty)
	Elapsed      time.Duration `json:"-"`
}

// hitBuckets is the resolution of the hit-rate-over-time series.
const hitBuckets = 60

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Run builds the workload and simulates every policy on it.
func Run(opts Options) (*Report, error) {
	if len(opts.Rates) > 0 {
		return RunSweep(opts)
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	n := opts.Requests
	if n == 0 && !isTrace(opts.Workload) {
		n = DefaultRequests
	}
	rate := opts.Rate
	if rate == 0 {
		rate = 1
	}
	w, err := BuildWorkloadRate(opts.Workload, n, opts.Seed, rate)
	if err != nil {
		return nil, err
	}
	if opts.PD != (PDOptions{}) {
		return simulatePD(w, opts)
	}
	return Simulate(w, opts)
}

func isTrace(name string) bool { return len(name) > 6 && name[:6] == "trace:" }

// Simulate runs every policy of opts over w.
func Simulate(w *Workload, opts Options) (*Report, error) {
	opts, err := opts.resolve(w)
	if err != nil {
		return nil, err
	}
	if err := applyFlowOptions(w, opts); err != nil {
		return nil, err
	}
	pols := opts.Policies
	variants := flowVariants(w, opts)
	if len(pols) == 0 && len(variants) > 0 {
		pols = []string{route.DefaultPolicy}
	} else if len(pols) == 0 {
		pols = PolicyNames
	}
	if err := checkPolicies(w, pols, opts); err != nil {
		return nil, err
	}
	if err := prepare(w, opts.PrefixLength); err != nil {
		return nil, err
	}
	span := w.Requests[len(w.Requests)-1].At
	scale, err := resolveScale(opts.Scale, span, opts.Replicas)
	if err != nil {
		return nil, err
	}
	rep := newReport(w, opts, scale)
	rep.EngineScheduling = w.Engine.SchedulingPolicy
	if err := runPolicies(rep, w, opts, pols, variants, scale); err != nil {
		return nil, err
	}
	rep.VirtualSeconds = span.Seconds()
	return rep, nil
}

// resolve checks o and fills in the defaults of its zero fields for w.
func (o Options) resolve(w *Workload) (Options, error) {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Replicas == 0 {
		o.Replicas = w.Replicas
	}
	if o.Replicas < 1 || o.Replicas > 1024 {
		return o, fmt.Errorf("sim: --replicas %d out of range 1..1024", o.Replicas)
	}
	if o.Routers == 0 {
		o.Routers = 1
	}
	if o.Routers < 1 || o.Routers > 256 {
		return o, fmt.Errorf("sim: --routers %d out of range 1..256", o.Routers)
	}
	if o.LoadHintInterval < 0 {
		return o, fmt.Errorf("sim: --load-hint %v must not be negative", o.LoadHintInterval)
	}
	if o.Threshold == 0 {
		o.Threshold = route.DefaultThreshold
	}
	if o.LoadFactor == 0 {
		o.LoadFactor = route.DefaultLoadFactor
	}
	if o.SLO == 0 {
		o.SLO = DefaultSLO
	}
	if o.SLO < 0 {
		return o, fmt.Errorf("sim: --slo %v must be positive", o.SLO)
	}
	return o, nil
}

// checkPolicies checks that every policy of pols exists and that w can be
// replayed if asked to.
func checkPolicies(w *Workload, pols []string, opts Options) error {
	for _, p := range pols {
		if p == ReplayPolicy {
			if err := checkReplay(w, opts.Replicas, opts.Scale); err != nil {
				return err
			}
			continue
		}
		if !slices.Contains(PolicyNames, p) {
			return fmt.Errorf("sim: unknown policy %q (have %v, or %s for a workload that carries its placement)", p, PolicyNames, ReplayPolicy)
		}
	}
	return nil
}

// prepare checks w's requests and computes their routing keys and blocks
// with routing window prefixLength.
func prepare(w *Workload, prefixLength int) error {
	if len(w.Requests) == 0 {
		return errors.New("sim: workload has no requests")
	}
	if err := checkCores(w.Cores); err != nil {
		return err
	}
	if err := checkFollowers(w.Requests); err != nil {
		return err
	}
	k := newKeyer(prefixLength)
	for i, r := range w.Requests {
		r.index = i
		var err error
		if r.key, err = k.key(r); err != nil {
			return err
		}
		if r.blk == nil {
			k.blocks(r)
		}
	}
	linkAnswers(w.Requests)
	return nil
}

// newReport is the report of a run of w under opts, before any policy ran.
func newReport(w *Workload, opts Options, scale []scaleAt) *Report {
	rate := opts.Rate
	if rate == 0 {
		rate = 1
	}
	rep := &Report{
		Workload: w.Name, Replicas: opts.Replicas, Requests: len(w.Requests),
		DefaultPolicy: route.DefaultPolicy, Rate: rate, SLO: float64(opts.SLO) / 1e6,
		Routers: opts.Routers, SpillChain: !opts.NoSpillChain, Note: w.Note, LoadHintInterval: opts.LoadHintInterval,
	}
	for _, s := range scale {
		rep.ScaleTimes = append(rep.ScaleTimes, s.at.Seconds())
		rep.ScaleLabels = append(rep.ScaleLabels, s.label)
	}
	return rep
}

// runPolicies runs every policy of pols over w, opts.Parallel at once, and
// the pooled bound beside them, into rep.
func runPolicies(rep *Report, w *Workload, opts Options, pols, variants []string, scale []scaleAt) error {
	var done atomic.Int64
	total := len(w.Requests) * (len(pols) + len(variants) + 1)
	progress := func() {
		if opts.Progress != nil {
			opts.Progress(int(done.Add(1)), total)
		}
	}
	par := opts.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	results := make([]PolicyResult, len(pols))
	errs := make([]error, len(pols)+2)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, p := range pols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			f, err := newFleet(w, opts, p, scale, progress)
			if err != nil {
				errs[i] = err
				return
			}
			results[i], errs[i] = f.run()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		sem <- struct{}{}
		defer func() { <-sem }()
		rep.PooledBoundHit, errs[len(pols)] = pooledBound(w, opts.Replicas, progress)
	}()
	rep.FlowControl, errs[len(pols)+1] = runVariants(w, opts, variants, scale, progress, sem)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	rep.Policies = results
	return nil
}

// flight is one request's journey through a run.
type flight struct {
	req     *Request
	at      time.Duration // arrival in this run
	replica int
	router  int
	dec     route.Decision
	spilled bool
	tokens  []vllmsim.Token
	hashes  []uint64
	queued  bool
	now     time.Time // virtual time of the pick
	peer    any       // a peer router's per-request state
	engID   vllmsim.RequestID
	gate    any // the flow-control variant's per-request state
}

func (f *flight) prompt() []vllmsim.Token {
	if f.tokens == nil {
		f.tokens = f.req.appendTokens(make([]vllmsim.Token, 0, f.req.PromptTokens()))
	}
	return f.tokens
}

// blockHashes are chained hashes of the prompt's 16-token blocks (the
// token-level peers).
func (f *flight) blockHashes() []uint64 {
	if f.hashes == nil {
		t := f.prompt()
		f.hashes = make([]uint64, 0, len(t)/vllmsim.BlockSize)
		h := uint64(0x5eed)
		if f.req.Group != "" {
			for _, c := range []byte(f.req.Group) {
				h = mix(h ^ uint64(c))
			}
		}
		for i := 0; i+vllmsim.BlockSize <= len(t); i += vllmsim.BlockSize {
			for _, tok := range t[i : i+vllmsim.BlockSize] {
				h = mix(h ^ uint64(tok))
			}
			f.hashes = append(f.hashes, h)
		}
	}
	return f.hashes
}

type replica struct {
	eng     *vllmsim.Engine
	next    time.Time // cached NextEvent, in the fleet's time
	nextTau time.Time // the same in the engine's time (Workload.Cores)
	clk     engineClock
	busy    bool // next is valid
	flights map[vllmsim.RequestID]*flight
	active  bool
	count   int // requests placed
}

type fleet struct {
	w        *Workload
	opts     Options
	policy   string
	scale    []scaleAt
	progress func()

	reps     []*replica
	pickers  []picker
	queues   [][]*flight
	inflight []int
	total    int
	active   []int
	nextHint time.Duration // virtual time of the next load-hint refresh
	slack    int           // the routers' Slack in force (for the bound check)

	// results
	ttfts          []float64
	byRequest      []float64 // TTFT by workload index, NaN until known
	cached, prompt int64
	bucketC        []int64
	bucketP        []int64
	spilled        int
	failed         int
	queued         int
	finished       int
	lastFinish     time.Time
	maxOver        int
	keysMoved      *float64
	outTokens      int64
	good           int // requests with TTFT within the SLO
	first          time.Duration

	turns   turnHeap // session turns released by answers, by arrival
	turnSeq int

	scraped []scraped // replica metrics as scraping peers see them
	// oraclePending is the prefill the oracle charged each replica and
	// whose first token has not come back (fleet-wide: the oracle sees
	// every router's requests).
	oraclePending []int64
	scrapedAt     time.Time

	// onFinish, if set, sees every request that finished and when (tests).
	onFinish func(fl *flight, at time.Time)
	placedOn map[*Request]int // first replica of each request

	// gate is the flow-control variant in front of the routers, nil for a
	// plain policy run (flows_gate.go).
	gate flowGate
}

func newFleet(w *Workload, opts Options, policy string, scale []scaleAt, progress func()) (*fleet, error) {
	f := &fleet{w: w, opts: opts, policy: policy, scale: scale, progress: progress,
		bucketC: make([]int64, hitBuckets), bucketP: make([]int64, hitBuckets), first: -1, placedOn: map[*Request]int{},
		byRequest: make([]float64, len(w.Requests))}
	for i := range f.byRequest {
		f.byRequest[i] = math.NaN()
	}
	for range opts.Replicas {
		if err := f.addReplica(); err != nil {
			return nil, err
		}
	}
	for i := range opts.Routers {
		var p picker
		f.slack = opts.Slack
		if f.slack == 0 {
			f.slack = route.DefaultSlack
		}
		if policy == ReplayPolicy {
			p = replayPicker{}
		} else if build, ok := peerBuilders[policy]; ok {
			if policy == oraclePolicy && opts.Slack == 0 {
				// The oracle keeps prefix-index's bound and is
				// measured against it.
				f.slack = route.DefaultIndexSlack
			}
			p = build(f, opts.Seed+uint64(i)*7919)
		} else {
			rp, err := newRoutePicker(route.Config{
				Policy: policy, DisableSpillChain: opts.NoSpillChain,
				Seed: opts.Seed + uint64(i)*7919, DefaultThreshold: opts.Threshold,
				LoadFactor: opts.LoadFactor, Slack: opts.Slack,
				DefaultCacheTokens: w.Engine.CacheBlocks * vllmsim.BlockSize,
				DecodeWeight:       opts.DecodeWeight,
			}, f.active, opts.Threshold, !opts.NoAnswers)
			if err != nil {
				return nil, err
			}
			f.slack = rp.r.Config().Slack
			p = rp
		}
		f.pickers = append(f.pickers, p)
	}
	f.queues = make([][]*flight, opts.Routers)
	return f, nil
}

func (f *fleet) addReplica() error {
	eng, err := vllmsim.NewEngine(f.w.Engine)
	if err != nil {
		return err
	}
	f.reps = append(f.reps, &replica{eng: eng, flights: map[vllmsim.RequestID]*flight{}, active: true, clk: engineClock{t0: epoch, tau0: epoch, speed: 1}})
	f.inflight = append(f.inflight, 0)
	f.active = append(f.active, len(f.reps)-1)
	return nil
}

func (f *fleet) run() (PolicyResult, error) {
	start := time.Now()
	reqs := f.w.Requests
	var starts []*Request // requests that arrive on their own, in At order
	for _, r := range reqs {
		if !r.follows {
			starts = append(starts, r)
		}
	}
	ai, si := 0, 0
	n := len(reqs)
	arrived := 0
	for f.finished+f.failed < n {
		ei, te := f.nextEngineEvent()
		areq, aat := f.nextArrival(starts, ai)
		var ta, ts time.Time
		haveA, haveS := areq != nil, si < len(f.scale)
		if haveA {
			ta = epoch.Add(aat)
		}
		if haveS {
			ts = epoch.Add(f.scale[si].at)
		}
		if f.gate != nil {
			if tg, ok := f.gate.next(); ok && (ei < 0 || tg.Before(te)) && (!haveA || tg.Before(ta)) && (!haveS || tg.Before(ts)) {
				f.gate.timer(tg)
				continue
			}
		}
		if f.opts.LoadHintInterval > 0 && (ei >= 0 || haveA || haveS) {
			th := epoch.Add(f.nextHint)
			if (ei < 0 || !te.Before(th)) && (!haveA || !ta.Before(th)) && (!haveS || !ts.Before(th)) {
				f.refreshHints(th)
				continue
			}
		}
		switch {
		case ei >= 0 && (!haveA || !ta.Before(te)) && (!haveS || !ts.Before(te)):
			f.engineEvents(ei, te)
		case haveS && (!haveA || !ta.Before(ts)):
			if err := f.applyScale(f.scale[si], ts); err != nil {
				return PolicyResult{}, err
			}
			si++
		case haveA:
			if ai < len(starts) && areq == starts[ai] {
				ai++
			} else {
				f.turns.pop()
			}
			f.arrive(&flight{req: areq, at: aat, router: arrived % len(f.pickers)}, ta)
			arrived++
		default:
			if f.opts.LoadHintInterval > 0 && f.refreshHints(epoch.Add(f.nextHint)) {
				continue // stale hints held the queues back
			}
			return PolicyResult{}, fmt.Errorf("sim: %s: %d requests stuck in router queues with no replica able to take them", f.policy, n-f.finished-f.failed)
		}
	}
	return f.result(time.Since(start)), nil
}

// nextEngineEvent is the busy replica whose engine steps next and when, or
// -1 if none is busy.
func (f *fleet) nextEngineEvent() (int, time.Time) {
	ei := -1
	var te time.Time
	for i, r := range f.reps {
		if !r.busy {
			continue
		}
		if ei < 0 || r.next.Before(te) {
			ei, te = i, r.next
		}
	}
	return ei, te
}

// nextArrival is the request that arrives next and when: starts[ai], the
// next independent request, or the earliest turn released by an answer;
// nil when neither is left.
func (f *fleet) nextArrival(starts []*Request, ai int) (*Request, time.Duration) {
	var areq *Request
	var aat time.Duration
	if ai < len(starts) {
		areq, aat = starts[ai], starts[ai].At
	}
	if len(f.turns) > 0 && (areq == nil || f.turns[0].at < aat) {
		areq, aat = f.turns[0].req, f.turns[0].at
	}
	return areq, aat
}

// arrive hands fl, arriving at ta, to its router: behind the requests
// already queued there, else to a replica, else into the queue.
func (f *fleet) arrive(fl *flight, ta time.Time) {
	if f.first < 0 {
		f.first = fl.at
	}
	if f.gate != nil {
		f.gate.arrive(fl, ta)
		return
	}
	f.route(fl, ta)
}

// route hands fl to its router at ta: behind the requests already queued
// there, else to a replica, else into the queue.
func (f *fleet) route(fl *flight, ta time.Time) {
	if len(f.queues[fl.router]) > 0 {
		f.enqueue(fl)
	} else if !f.dispatch(fl, ta) {
		f.enqueue(fl)
	}
}

// releaseNext schedules the turn that follows fl's request, think time after
// now (when fl's answer came back, or it failed).
func (f *fleet) releaseNext(fl *flight, now time.Time) {
	if nx := fl.req.next; nx != nil {
		f.turns.push(pendingTurn{at: now.Sub(epoch) + nx.Think, seq: f.turnSeq, req: nx})
		f.turnSeq++
	}
}

// refreshHints gives every router the fleet's in-flight count per active
// replica at now, schedules the next refresh, and retries the router queues;
// it reports whether any queued request was dispatched.
func (f *fleet) refreshHints(now time.Time) bool {
	f.nextHint += f.opts.LoadHintInterval
	for _, p := range f.pickers {
		p.hint(f.active, f.inflight)
	}
	moved := false
	for r := range f.queues {
		before := len(f.queues[r])
		f.drain(r, now)
		moved = moved || len(f.queues[r]) < before
	}
	return moved
}

func (f *fleet) enqueue(fl *flight) {
	if !fl.queued {
		fl.queued = true
		f.queued++
	}
	f.queues[fl.router] = append(f.queues[fl.router], fl)
}

// dispatch picks a replica for fl and submits it at now; false means the
// router is saturated.
func (f *fleet) dispatch(fl *flight, now time.Time) bool {
	fl.now = now
	idx, ok := f.pickers[fl.router].pick(fl)
	if !ok {
		return false
	}
	fl.replica = idx
	f.inflight[idx]++
	f.total++
	nAct := len(f.active)
	bound := int(math.Ceil(f.opts.LoadFactor * float64(f.total) / float64(nAct)))
	if f.slack > 0 {
		bound = max(bound, (f.total+nAct-1)/nAct+f.slack)
	}
	if over := f.inflight[idx] - bound; over > f.maxOver {
		f.maxOver = over
	}
	if fl.spilled {
		f.spilled++
	}
	rep := f.reps[idx]
	rep.count++
	if _, ok := f.placedOn[fl.req]; !ok {
		f.placedOn[fl.req] = idx
	}
	er := vllmsim.Request{Prompt: fl.prompt(), MaxTokens: fl.req.Output}
	if f.w.Salted {
		er.CacheSalt = fl.req.Group
	}
	if f.gate != nil {
		er.Priority = f.gate.enginePriority(fl)
	}
	id, err := rep.eng.Submit(f.engineTime(rep, now), er)
	if err != nil {
		f.release(fl)
		f.failed++
		f.progress()
		f.releaseNext(fl, now)
		return true
	}
	fl.tokens, fl.hashes = nil, nil // the engine holds the prompt now
	rep.flights[id] = fl
	fl.engID = id
	// Submit may have produced events at now; look at the engine again.
	wasBusy := rep.busy
	f.setNext(rep, f.engineTime(rep, now), true)
	rep.next = now
	if !wasBusy {
		f.reclock(now)
	}
	return true
}

func (f *fleet) release(fl *flight) {
	f.pickers[fl.router].done(fl)
	f.inflight[fl.replica]--
	f.total--
}

func (f *fleet) engineEvents(i int, now time.Time) {
	rep := f.reps[i]
	tau := f.engineTime(rep, now)
	if rep.busy && tau.Before(rep.nextTau) {
		tau = rep.nextTau // the map rounds: reach the event it promised
	}
	evs := rep.eng.Advance(tau)
	retry := map[int]bool{}
	for _, ev := range evs {
		fl := rep.flights[ev.ID]
		if fl == nil {
			continue
		}
		if ev.Kind == vllmsim.EventFirstToken {
			arrival := epoch.Add(fl.at)
			ttft := f.fleetTime(rep, ev.FirstToken).Sub(arrival)
			f.ttfts = append(f.ttfts, float64(ttft)/1e6)
			f.byRequest[fl.req.index] = float64(ttft) / 1e6
			if ttft <= f.opts.SLO {
				f.good++
			}
			f.cached += int64(ev.CachedTokens)
			f.prompt += int64(ev.PromptTokens)
			if ft, ok := f.pickers[fl.router].(firstTokener); ok {
				ft.firstToken(fl, ev.CachedTokens, ev.PromptTokens)
			}
			if f.gate != nil {
				f.gate.firstToken(fl, f.fleetTime(rep, ev.FirstToken))
			}
			b := f.bucket(fl.at)
			f.bucketC[b] += int64(ev.CachedTokens)
			f.bucketP[b] += int64(ev.PromptTokens)
		}
		if ev.Kind == vllmsim.EventFinished {
			ev.Time = f.fleetTime(rep, ev.Time)
			delete(rep.flights, ev.ID)
			f.release(fl)
			f.finished++
			f.outTokens += int64(ev.OutputTokens)
			if f.onFinish != nil {
				f.onFinish(fl, ev.Time)
			}
			if ev.Time.After(f.lastFinish) {
				f.lastFinish = ev.Time
			}
			f.releaseNext(fl, ev.Time)
			f.progress()
			retry[fl.router] = true
			if f.gate != nil {
				f.gate.finished(fl, ev.Time, ev.OutputTokens)
			}
		}
	}
	wasBusy := rep.busy
	next, busy := rep.eng.NextEvent()
	f.setNext(rep, next, busy)
	if busy != wasBusy {
		f.reclock(now)
	}
	for r := range len(f.queues) {
		if retry[r] {
			f.drain(r, now)
		}
	}
	if f.gate != nil && len(evs) > 0 {
		f.gate.wake(now)
	}
}

// drain dispatches router r's queue in FIFO order while it has room.
func (f *fleet) drain(r int, now time.Time) {
	q := f.queues[r]
	k := 0
	for k < len(q) && f.dispatch(q[k], now) {
		q[k] = nil
		k++
	}
	f.queues[r] = q[k:]
}

func (f *fleet) bucket(at time.Duration) int {
	span := f.w.Requests[len(f.w.Requests)-1].At
	if span <= 0 {
		return 0
	}
	return min(int(float64(at)/float64(span)*hitBuckets), hitBuckets-1)
}

func (f *fleet) result(elapsed time.Duration) PolicyResult {
	res := PolicyResult{Name: f.policy, Role: PolicyRole(f.policy), Failed: f.failed, Queued: f.queued, Elapsed: elapsed, KeysMovedFraction: f.keysMoved}
	if f.prompt > 0 {
		res.HitRate = float64(f.cached) / float64(f.prompt)
	}
	sort.Float64s(f.ttfts)
	res.TTFTs = f.ttfts
	res.RequestTTFTs = f.byRequest
	res.TTFT = Percentiles{P50: quantile(f.ttfts, 0.5), P90: quantile(f.ttfts, 0.9), P99: quantile(f.ttfts, 0.99)}
	if d := f.lastFinish.Sub(epoch.Add(f.first)).Seconds(); d > 0 {
		res.Throughput = float64(f.finished) / d
		res.OutputTokensPerSec = float64(f.outTokens) / d
	}
	if n := len(f.w.Requests); n > 0 {
		res.Goodput = float64(f.good) / float64(n)
		res.GoodputRate = res.Goodput * res.Throughput
	}
	placed := 0
	for _, r := range f.reps {
		placed += r.count
	}
	maxShare := 0.0
	for _, r := range f.reps {
		s := 0.0
		if placed > 0 {
			s = float64(r.count) / float64(placed)
		}
		res.Share = append(res.Share, s)
		maxShare = max(maxShare, s)
	}
	res.MaxShareRatio = maxShare * float64(len(f.reps))
	if placed > 0 {
		res.SpillRate = float64(f.spilled) / float64(placed)
	}
	res.MaxInflightOverBound = f.maxOver
	later, same := 0, 0
	for r, at := range f.placedOn {
		if r.parent == nil {
			continue
		}
		if prev, ok := f.placedOn[r.parent]; ok {
			later++
			if prev == at {
				same++
			}
		}
	}
	if later > 0 {
		v := float64(same) / float64(later)
		res.SameReplicaTurns = &v
	}
	for b := range hitBuckets {
		v := math.NaN()
		if f.bucketP[b] > 0 {
			v = float64(f.bucketC[b]) / float64(f.bucketP[b])
		}
		res.HitSeries = append(res.HitSeries, v)
	}
	return res
}

// quantile of sorted xs by the nearest-rank method.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

// pooledBound runs the workload on one engine with the whole fleet's
// capacity (cache, batch and prefill rate): the hit rate no routing can beat.
func pooledBound(w *Workload, n int, progress func()) (float64, error) {
	cfg := w.Engine
	cfg.CacheBlocks *= n
	cfg.MaxNumSeqs *= n
	cfg.PrefillTokensPerSec *= float64(n)
	eng, err := vllmsim.NewEngine(cfg)
	if err != nil {
		return 0, err
	}
	var cached, prompt int64
	count := func(evs []vllmsim.Event) {
		for _, ev := range evs {
			if ev.Kind == vllmsim.EventFirstToken {
				cached += int64(ev.CachedTokens)
				prompt += int64(ev.PromptTokens)
			}
			if ev.Kind == vllmsim.EventFinished {
				progress()
			}
		}
	}
	for _, r := range w.Requests {
		now := epoch.Add(r.At)
		count(eng.Advance(now))
		fl := flight{req: r}
		er := vllmsim.Request{Prompt: fl.prompt(), MaxTokens: r.Output}
		if w.Salted {
			er.CacheSalt = r.Group
		}
		if _, err := eng.Submit(now, er); err != nil {
			progress()
		}
	}
	for {
		t, ok := eng.NextEvent()
		if !ok {
			break
		}
		count(eng.Advance(t))
	}
	count(eng.Advance(eng.Now()))
	if prompt == 0 {
		return 0, nil
	}
	return float64(cached) / float64(prompt), nil
}
