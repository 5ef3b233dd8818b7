package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prefixgate/prefixgate/internal/sim"
	"github.com/prefixgate/prefixgate/route"
)

// runSim is `prefixgate sim`: a discrete-event simulation of a fleet in
// virtual time comparing routing policies.
func runSim(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f simFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: prefixgate sim [flags]\n\nSimulate a vLLM fleet in virtual time behind the real router and compare routing policies.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prefixgate sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	opts, err := f.options()
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate sim: %v\n", err)
		return 2
	}
	if !f.quiet {
		// Progress goes to stderr so that stdout stays the table or the one
		// JSON object: a bar on a terminal, a line per tenth otherwise.
		bar := newProgressBar(stderr, "simulating", isTerminal(stderr))
		opts.Progress = bar.update
		defer bar.finish()
	}
	rep, err := sim.Run(opts)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate sim: %v\n", err)
		return 1
	}
	if f.plot != "" {
		wrote, err := rep.WritePlots(f.plot)
		if err != nil {
			fmt.Fprintf(stderr, "prefixgate sim: --plot: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "prefixgate sim: wrote %s\n", strings.Join(wrote, ", "))
	}
	if f.asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate sim: %v\n", err)
		return 1
	}
	return 0
}

// simFlags are sim's flags: most straight into sim.Options, the rest
// parsed by options.
type simFlags struct {
	o                      sim.Options
	policies, scale, rates string
	pd                     string
	flows, variants        string
	spillChain             bool
	asJSON, quiet          bool
	plot                   string
}

func (f *simFlags) register(fs *flag.FlagSet) {
	o := &f.o
	fs.StringVar(&o.Workload, "workload", "long-context", "workload: "+strings.Join(sim.Workloads, ", ")+", or trace:FILE (Mooncake JSONL)")
	fs.IntVar(&o.Requests, "requests", 0, "number of requests (0: 20000; for a trace, all of it)")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed")
	fs.IntVar(&o.Replicas, "replicas", 0, "replicas (0: the workload's, 7)")
	fs.StringVar(&f.policies, "policies", "all", "comma-separated policies: "+strings.Join(sim.PolicyNames, ", ")+", or all")
	fs.StringVar(&f.scale, "scale", "", "scale events: +K@P% or -K@SECONDS, comma-separated (e.g. +1@50%)")
	fs.IntVar(&o.Routers, "routers", 1, "independent routers over one fleet, each with its own load view")
	fs.DurationVar(&o.LoadHintInterval, "load-hint", 0, "give every router the fleet's per-replica in-flight counts this often in virtual time (e.g. 100ms; 0: each router counts only its own)")
	fs.Float64Var(&o.LoadFactor, "load-factor", 0, "c of the bounded-load ring (0: route's default, 1.25)")
	fs.IntVar(&o.Slack, "slack", 0, "keep the bound at least this far above the mean in-flight count (route.Config.Slack; 0: route's default for the policy, 3, prefix-index 12; -1: none)")
	fs.BoolVar(&f.spillChain, "spill-chain", true, "let prefix-aware use the spill chain (false: plain clockwise walk)")
	fs.IntVar(&o.PrefixLength, "prefix-length", 0, "routing window N in characters (0: normalize's default)")
	fs.IntVar(&o.Threshold, "threshold", 0, fmt.Sprintf("per-replica concurrency threshold (0: route's default, %d)", route.DefaultThreshold))
	fs.Float64Var(&o.Rate, "rate", 1, "multiply the workload's arrival rate by this (think times within a session stay)")
	fs.StringVar(&f.rates, "rates", "", "sweep: comma-separated rate multipliers (e.g. 0.5,1,2,4); each runs the whole comparison with --requests requests (0: 10000)")
	fs.DurationVar(&o.SLO, "slo", sim.DefaultSLO, "TTFT objective for goodput and the sustainable rate")
	fs.IntVar(&o.DecodeWeight, "decode-weight", 0, "prefix-index: prompt tokens of work charged per request a replica holds (0: route's default)")
	fs.BoolVar(&o.NoAnswers, "no-answers", false, "prefix-index: do not learn the answers' blocks")
	fs.StringVar(&f.pd, "pd", "", "prefill/decode disaggregation: P:D prefill and decode replicas, compared with all P+D aggregated (policies: "+strings.Join(sim.PDPolicyNames, ", ")+")")
	fs.Float64Var(&o.PD.SplitInterference, "split-interference", 0, "--pd: the default policy's split cost model, routing.split_interference (0: route's default)")
	fs.Float64Var(&o.PD.SplitTransferWeight, "split-transfer-weight", 0, "--pd: routing.split_transfer_weight (0: route's default)")
	fs.IntVar(&o.PD.SplitMinTokens, "split-min-tokens", 0, "--pd: routing.split_min_tokens (0: route's default; negative: 0)")
	fs.IntVar(&o.PD.ChunkTokens, "pd-chunk-tokens", 0, fmt.Sprintf("--pd: every engine's chunked-prefill budget per step (0: %d)", sim.DefaultPDChunkTokens))
	fs.StringVar(&f.flows, "flows", "", "keep only these fairness ids' requests, comma-separated (a workload with flows, e.g. noisy-neighbor)")
	fs.StringVar(&o.EngineScheduling, "engine-scheduling", "", "replicas' scheduling policy: fcfs or priority (default: the workload's)")
	fs.IntVar(&o.FlowControl.HeadroomPrefillTokens, "headroom-prefill-tokens", 0, "the prefixgate variant's flow_control.headroom_prefill_tokens (0: serve's default; negative: off)")
	fs.Float64Var(&o.FlowControl.ShortPromptShare, "short-prompt-share", 0, "the prefixgate variant's flow_control.short_prompt_share (0: serve's default; negative: off)")
	fs.StringVar(&f.variants, "variants", "all", "flow-control variants on a workload with flows, comma-separated: "+strings.Join(sim.FlowVariants, ", ")+", or all")
	fs.BoolVar(&f.asJSON, "json", false, "print exactly one JSON object instead of the table")
	fs.StringVar(&f.plot, "plot", "", "write SVG charts into this directory")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress on stderr")
}

// options checks the flags and returns the simulation's options.
func (f *simFlags) options() (sim.Options, error) {
	opts := f.o
	opts.NoSpillChain = !f.spillChain
	if !(opts.Rate > 0) || math.IsInf(opts.Rate, 0) {
		return opts, fmt.Errorf("--rate %v must be a positive number", opts.Rate)
	}
	if opts.SLO <= 0 {
		return opts, fmt.Errorf("--slo %v must be positive", opts.SLO)
	}
	if f.rates != "" {
		for _, r := range strings.Split(f.rates, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) {
				return opts, fmt.Errorf("--rates: %q is not a positive rate multiplier", r)
			}
			opts.Rates = append(opts.Rates, x)
		}
	}
	if opts.Requests < 0 {
		return opts, fmt.Errorf("--requests %d must not be negative", opts.Requests)
	}
	if !strings.HasPrefix(opts.Workload, "trace:") && !slices.Contains(sim.Workloads, opts.Workload) {
		return opts, fmt.Errorf("--workload: unknown workload %q (have %s, or trace:FILE)", opts.Workload, strings.Join(sim.Workloads, ", "))
	}
	names := sim.PolicyNames
	if f.pd != "" {
		var err error
		if opts.PD.Prefill, opts.PD.Decode, err = sim.ParsePD(f.pd); err != nil {
			return opts, fmt.Errorf("--pd: %v", err)
		}
		if f.rates != "" || f.scale != "" || opts.Routers > 1 || opts.LoadHintInterval > 0 || opts.Replicas != 0 {
			return opts, fmt.Errorf("--pd: runs one router over P+D replicas, without --rates, --scale, --routers, --load-hint or --replicas")
		}
		names = sim.PDPolicyNames
	} else if opts.PD != (sim.PDOptions{}) {
		return opts, fmt.Errorf("--split-interference, --split-transfer-weight, --split-min-tokens and --pd-chunk-tokens need --pd")
	}
	if f.policies != "all" && f.policies != "" {
		for _, p := range strings.Split(f.policies, ",") {
			p = strings.TrimSpace(p)
			if !slices.Contains(names, p) {
				return opts, fmt.Errorf("--policies: unknown policy %q (have %s, or all)", p, strings.Join(names, ", "))
			}
			opts.Policies = append(opts.Policies, p)
		}
	}
	if err := f.flowOptions(&opts); err != nil {
		return opts, err
	}
	if f.scale != "" {
		evs, err := sim.ParseScale(f.scale)
		if err != nil {
			return opts, fmt.Errorf("--scale: %v", err)
		}
		opts.Scale = evs
	}
	return opts, nil
}

// flowOptions checks --flows, --engine-scheduling and --variants into opts.
func (f *simFlags) flowOptions(opts *sim.Options) error {
	for id := range strings.SplitSeq(f.flows, ",") {
		if id = strings.TrimSpace(id); id != "" {
			opts.Flows = append(opts.Flows, id)
		}
	}
	if f.flows != "" && len(opts.Flows) == 0 {
		return fmt.Errorf("--flows %q names no fairness id", f.flows)
	}
	if e := opts.EngineScheduling; e != "" && e != "fcfs" && e != "priority" {
		return fmt.Errorf("--engine-scheduling %q is not fcfs or priority", e)
	}
	if err := opts.FlowControl.Validate(); err != nil {
		return fmt.Errorf("the prefixgate variant's %w", err)
	}
	if f.variants != "all" && f.variants != "" {
		for v := range strings.SplitSeq(f.variants, ",") {
			opts.Variants = append(opts.Variants, strings.TrimSpace(v))
		}
		if err := sim.CheckVariants(opts.Variants); err != nil {
			return fmt.Errorf("--variants: %v", strings.TrimPrefix(err.Error(), "sim: "))
		}
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar reports progress on a writer, safe for concurrent use: on a
// terminal a one-line bar redrawn at every percent, otherwise one line at
// every tenth.
type progressBar struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	tty   bool
	last  int
	drawn bool
}

func newProgressBar(w io.Writer, label string, tty bool) *progressBar {
	return &progressBar{w: w, label: label, tty: tty, last: -1}
}

func (b *progressBar) update(done, total int) {
	if total <= 0 {
		return
	}
	pct := done * 100 / total
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.tty {
		if tenth := pct / 10 * 10; tenth > b.last {
			b.last = tenth
			fmt.Fprintf(b.w, "%s: %d%% (%d of %d simulated requests)\n", b.label, tenth, done, total)
		}
		return
	}
	if pct == b.last {
		return
	}
	b.last = pct
	const width = 30
	fill := pct * width / 100
	fmt.Fprintf(b.w, "\r%s [%s%s] %3d%%", b.label, strings.Repeat("#", fill), strings.Repeat(".", width-fill), pct)
	b.drawn = true
}

func (b *progressBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
	}
}
