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
	workload := fs.String("workload", "long-context", "workload: "+strings.Join(sim.Workloads, ", ")+", or trace:FILE (Mooncake JSONL)")
	requests := fs.Int("requests", 0, "number of requests (0: 20000; for a trace, all of it)")
	seed := fs.Uint64("seed", 1, "random seed")
	replicas := fs.Int("replicas", 0, "replicas (0: the workload's, 7)")
	policies := fs.String("policies", "all", "comma-separated policies: "+strings.Join(sim.PolicyNames, ", ")+", or all")
	scale := fs.String("scale", "", "scale events: +K@P% or -K@SECONDS, comma-separated (e.g. +1@50%)")
	routers := fs.Int("routers", 1, "independent routers over one fleet, each with its own load view")
	loadHint := fs.Duration("load-hint", 0, "give every router the fleet's per-replica in-flight counts this often in virtual time (e.g. 100ms; 0: each router counts only its own)")
	loadFactor := fs.Float64("load-factor", 0, "c of the bounded-load ring (0: route's default, 1.25)")
	slack := fs.Int("slack", 0, "keep the bound at least this far above the mean in-flight count (route.Config.Slack; 0: route's default for the policy, 3, prefix-index 12; -1: none)")
	spillChain := fs.Bool("spill-chain", true, "let prefix-aware use the spill chain (false: plain clockwise walk)")
	prefixLength := fs.Int("prefix-length", 0, "routing window N in characters (0: normalize's default)")
	threshold := fs.Int("threshold", 0, fmt.Sprintf("per-replica concurrency threshold (0: route's default, %d)", route.DefaultThreshold))
	rate := fs.Float64("rate", 1, "multiply the workload's arrival rate by this (think times within a session stay)")
	rates := fs.String("rates", "", "sweep: comma-separated rate multipliers (e.g. 0.5,1,2,4); each runs the whole comparison with --requests requests (0: 10000)")
	slo := fs.Duration("slo", sim.DefaultSLO, "TTFT objective for goodput and the sustainable rate")
	decodeWeight := fs.Int("decode-weight", 0, "prefix-index: prompt tokens of work charged per request a replica holds (0: route's default)")
	noAnswers := fs.Bool("no-answers", false, "prefix-index: do not learn the answers' blocks")
	asJSON := fs.Bool("json", false, "print exactly one JSON object instead of the table")
	plot := fs.String("plot", "", "write SVG charts into this directory")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
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
	opts := sim.Options{
		Workload: *workload, Requests: *requests, Seed: *seed, Replicas: *replicas,
		Routers: *routers, NoSpillChain: !*spillChain, PrefixLength: *prefixLength, Threshold: *threshold,
		LoadHintInterval: *loadHint, LoadFactor: *loadFactor, Slack: *slack,
		Rate: *rate, SLO: *slo,
		DecodeWeight: *decodeWeight, NoAnswers: *noAnswers,
	}
	if !(*rate > 0) || math.IsInf(*rate, 0) {
		fmt.Fprintf(stderr, "prefixgate sim: --rate %v must be a positive number\n", *rate)
		return 2
	}
	if *slo <= 0 {
		fmt.Fprintf(stderr, "prefixgate sim: --slo %v must be positive\n", *slo)
		return 2
	}
	if *rates != "" {
		for _, f := range strings.Split(*rates, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) {
				fmt.Fprintf(stderr, "prefixgate sim: --rates: %q is not a positive rate multiplier\n", f)
				return 2
			}
			opts.Rates = append(opts.Rates, x)
		}
	}
	if *requests < 0 {
		fmt.Fprintf(stderr, "prefixgate sim: --requests %d must not be negative\n", *requests)
		return 2
	}
	if !strings.HasPrefix(*workload, "trace:") && !slices.Contains(sim.Workloads, *workload) {
		fmt.Fprintf(stderr, "prefixgate sim: --workload: unknown workload %q (have %s, or trace:FILE)\n", *workload, strings.Join(sim.Workloads, ", "))
		return 2
	}
	if *policies != "all" && *policies != "" {
		for _, p := range strings.Split(*policies, ",") {
			p = strings.TrimSpace(p)
			if !slices.Contains(sim.PolicyNames, p) {
				fmt.Fprintf(stderr, "prefixgate sim: --policies: unknown policy %q (have %s, or all)\n", p, strings.Join(sim.PolicyNames, ", "))
				return 2
			}
			opts.Policies = append(opts.Policies, p)
		}
	}
	if *scale != "" {
		evs, err := sim.ParseScale(*scale)
		if err != nil {
			fmt.Fprintf(stderr, "prefixgate sim: --scale: %v\n", err)
			return 2
		}
		opts.Scale = evs
	}
	if !*quiet {
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
	if *plot != "" {
		wrote, err := rep.WritePlots(*plot)
		if err != nil {
			fmt.Fprintf(stderr, "prefixgate sim: --plot: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "prefixgate sim: wrote %s\n", strings.Join(wrote, ", "))
	}
	if *asJSON {
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
