package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

const vllmsimUsage = `usage: prefixgate vllmsim [flags]

Serves K simulated vLLM replicas on consecutive ports from --listen (port 0:
an ephemeral port each), each with vLLM's OpenAI-compatible endpoints, its own
prefix cache and queue, /metrics with vLLM's metric names, and fault
injection through POST /admin/faults. Prints each replica's URL on standard
output, one per line, once all listen; serves until SIGINT or SIGTERM, then
shuts down gracefully.

Exit status: 0 after a clean shutdown, 1 on a serving error, 2 usage error.

flags:
`

// runVLLMSim implements "prefixgate vllmsim".
func runVLLMSim(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runVLLMSimContext(ctx, args, stdin, stdout, stderr)
}

// runVLLMSimContext is runVLLMSim serving until ctx ends.
func runVLLMSimContext(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("vllmsim", flag.ContinueOnError)
	var f vllmsimFlags
	f.register(fset)
	usage := func(w io.Writer) {
		fmt.Fprint(w, vllmsimUsage)
		fset.SetOutput(w)
		fset.PrintDefaults()
		fset.SetOutput(io.Discard)
	}
	if _, code, done := parseArgs(fset, args, stdout, stderr, usage); done {
		return code
	}
	cfg, err := f.config(fset)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate vllmsim: %v\n", err)
		fmt.Fprintln(stderr, "run 'prefixgate vllmsim --help' for usage")
		return 2
	}
	// The fleet outlives ctx so that it can shut down gracefully.
	fleet, err := vllmsim.StartFleet(context.WithoutCancel(ctx), f.listen, f.replicas, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate vllmsim: %v\n", err)
		return 1
	}
	for _, u := range fleet.URLs() {
		fmt.Fprintln(stdout, u)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fleet.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "prefixgate vllmsim: shutdown: %v\n", err)
		return 1
	}
	return 0
}

// vllmsimFlags are vllmsim's flags: most straight into vllmsim.Config, the
// rest turned into it by config.
type vllmsimFlags struct {
	cfg      vllmsim.Config
	listen   string
	replicas int
	adapters string
	spike    time.Duration
}

func (f *vllmsimFlags) register(fset *flag.FlagSet) {
	c, e, fl := &f.cfg, &f.cfg.Engine, &f.cfg.Faults
	fset.StringVar(&f.listen, "listen", "127.0.0.1:8000", "HOST:PORT of the first replica; port 0 for ephemeral ports")
	fset.IntVar(&f.replicas, "replicas", 1, "number of replicas K, on consecutive ports")
	fset.StringVar(&c.Name, "name", "vllmsim", "replica name prefix (X-Vllmsim-Replica: NAME-i)")
	fset.StringVar(&c.Model, "model", "", "served model name (default: the preset's)")
	fset.StringVar(&c.Preset, "preset", vllmsim.DefaultPreset, "engine preset: "+presetNames())
	fset.Float64Var(&c.Speed, "speed", 1, "run the engine clock X times faster than wall time")
	fset.IntVar(&e.MaxNumSeqs, "max-num-seqs", 0, "running batch limit (default: the preset's)")
	fset.IntVar(&e.CacheBlocks, "cache-blocks", 0, "KV cache capacity in 16-token blocks (default: the preset's)")
	fset.IntVar(&e.MaxModelLen, "max-model-len", 0, "maximum prompt plus output tokens (default: the preset's)")
	fset.Float64Var(&e.PrefillTokensPerSec, "prefill-rate", 0, "prefill tokens per second (default: the preset's)")
	fset.DurationVar(&e.DecodeStepBase, "decode-step", 0, "decode step base time (default: the preset's)")
	fset.DurationVar(&e.DecodeStepPerSeq, "decode-step-per-seq", 0, "decode step time added per running request (default: the preset's)")
	fset.StringVar(&e.SchedulingPolicy, "scheduling-policy", vllmsim.SchedulingFCFS, "how waiting requests are served: fcfs (arrival order) or priority (the request's priority field, lower first, preempting running requests of lower priority)")
	fset.IntVar(&c.DefaultMaxTokens, "default-max-tokens", 16, "output tokens when a request sets no max_tokens")
	fset.StringVar(&f.adapters, "adapters", "", "LoRA adapters loaded at start, comma-separated NAME or NAME=PATH")
	fset.Float64Var(&fl.ErrorRate, "error-rate", 0, "fraction of generation requests answered with 500")
	fset.Float64Var(&fl.LatencySpikeRate, "latency-spike-rate", 0, "fraction of generation requests delayed by --latency-spike")
	fset.DurationVar(&f.spike, "latency-spike", time.Second, "wall-time delay of a latency spike")
	fset.BoolVar(&fl.Hang, "hang", false, "never answer (until the client cancels)")
	fset.BoolVar(&fl.CloseConnection, "close-connection", false, "close every connection without answering")
	fset.Uint64Var(&c.Seed, "seed", 0, "seed of fault injection and response ids")
	fset.StringVar(&c.Role, "role", vllmsim.RoleBoth, "part in a disaggregated fleet: prefill (holds KV for decode workers), decode (imports it) or both")
	fset.StringVar(&c.KVLoadFailure, "kv-load-failure", vllmsim.KVLoadRecompute, "when a decode worker cannot read a vLLM transfer: recompute the prompt, or fail the request with 500")
}

// config checks the parsed flags and returns the fleet's configuration;
// an error is a usage error.
func (f *vllmsimFlags) config(fset *flag.FlagSet) (vllmsim.Config, error) {
	cfg, e := f.cfg, f.cfg.Engine
	switch {
	case fset.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q", fset.Arg(0))
	case f.replicas < 1:
		return cfg, errors.New("--replicas must be at least 1")
	case cfg.Speed <= 0:
		return cfg, errors.New("--speed must be positive")
	case e.MaxNumSeqs < 0 || e.CacheBlocks < 0 || e.MaxModelLen < 0 || e.PrefillTokensPerSec < 0 ||
		e.DecodeStepBase < 0 || e.DecodeStepPerSeq < 0 || cfg.DefaultMaxTokens < 1:
		return cfg, errors.New("engine sizes and rates must not be negative, --default-max-tokens at least 1")
	}
	cfg.Faults.LatencySpike = vllmsim.Duration(f.spike)
	for a := range strings.SplitSeq(f.adapters, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Adapters = append(cfg.Adapters, a)
		}
	}
	if err := vllmsim.CheckConfig(cfg); err != nil {
		return cfg, errors.New(strings.TrimPrefix(err.Error(), "vllmsim: "))
	}
	return cfg, nil
}

func presetNames() string {
	names := make([]string, len(vllmsim.Presets))
	for i, p := range vllmsim.Presets {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
