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
	listen := fset.String("listen", "127.0.0.1:8000", "HOST:PORT of the first replica; port 0 for ephemeral ports")
	replicas := fset.Int("replicas", 1, "number of replicas K, on consecutive ports")
	name := fset.String("name", "vllmsim", "replica name prefix (X-Vllmsim-Replica: NAME-i)")
	model := fset.String("model", "", "served model name (default: the preset's)")
	preset := fset.String("preset", vllmsim.DefaultPreset, "engine preset: "+presetNames())
	speed := fset.Float64("speed", 1, "run the engine clock X times faster than wall time")
	maxSeqs := fset.Int("max-num-seqs", 0, "running batch limit (default: the preset's)")
	blocks := fset.Int("cache-blocks", 0, "KV cache capacity in 16-token blocks (default: the preset's)")
	maxLen := fset.Int("max-model-len", 0, "maximum prompt plus output tokens (default: the preset's)")
	prefill := fset.Float64("prefill-rate", 0, "prefill tokens per second (default: the preset's)")
	stepBase := fset.Duration("decode-step", 0, "decode step base time (default: the preset's)")
	stepPerSeq := fset.Duration("decode-step-per-seq", 0, "decode step time added per running request (default: the preset's)")
	maxTokens := fset.Int("default-max-tokens", 16, "output tokens when a request sets no max_tokens")
	adapters := fset.String("adapters", "", "LoRA adapters loaded at start, comma-separated NAME or NAME=PATH")
	errorRate := fset.Float64("error-rate", 0, "fraction of generation requests answered with 500")
	spikeRate := fset.Float64("latency-spike-rate", 0, "fraction of generation requests delayed by --latency-spike")
	spike := fset.Duration("latency-spike", time.Second, "wall-time delay of a latency spike")
	hang := fset.Bool("hang", false, "never answer (until the client cancels)")
	closeConn := fset.Bool("close-connection", false, "close every connection without answering")
	seed := fset.Uint64("seed", 0, "seed of fault injection and response ids")
	usage := func(w io.Writer) {
		fmt.Fprint(w, vllmsimUsage)
		fset.SetOutput(w)
		fset.PrintDefaults()
		fset.SetOutput(io.Discard)
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "prefixgate vllmsim: "+format+"\n", a...)
		fmt.Fprintln(stderr, "run 'prefixgate vllmsim --help' for usage")
		return 2
	}
	if _, code, done := parseArgs(fset, args, stdout, stderr, usage); done {
		return code
	}
	if fset.NArg() > 0 {
		return usageErr("unexpected argument %q", fset.Arg(0))
	}
	if *replicas < 1 {
		return usageErr("--replicas must be at least 1")
	}
	if *speed <= 0 {
		return usageErr("--speed must be positive")
	}
	if *maxSeqs < 0 || *blocks < 0 || *maxLen < 0 || *prefill < 0 || *stepBase < 0 || *stepPerSeq < 0 || *maxTokens < 1 {
		return usageErr("engine sizes and rates must not be negative, --default-max-tokens at least 1")
	}
	cfg := vllmsim.Config{
		Preset: *preset,
		Model:  *model,
		Engine: vllmsim.EngineConfig{
			MaxNumSeqs:          *maxSeqs,
			CacheBlocks:         *blocks,
			MaxModelLen:         *maxLen,
			PrefillTokensPerSec: *prefill,
			DecodeStepBase:      *stepBase,
			DecodeStepPerSeq:    *stepPerSeq,
		},
		Speed:            *speed,
		DefaultMaxTokens: *maxTokens,
		Faults: vllmsim.Faults{
			ErrorRate:        *errorRate,
			LatencySpikeRate: *spikeRate,
			LatencySpike:     vllmsim.Duration(*spike),
			Hang:             *hang,
			CloseConnection:  *closeConn,
		},
		Seed: *seed,
		Name: *name,
	}
	for a := range strings.SplitSeq(*adapters, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Adapters = append(cfg.Adapters, a)
		}
	}
	if err := vllmsim.CheckConfig(cfg); err != nil {
		return usageErr("%s", strings.TrimPrefix(err.Error(), "vllmsim: "))
	}
	// The fleet outlives ctx so that it can shut down gracefully.
	fleet, err := vllmsim.StartFleet(context.WithoutCancel(ctx), *listen, *replicas, cfg)
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

func presetNames() string {
	names := make([]string, len(vllmsim.Presets))
	for i, p := range vllmsim.Presets {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
