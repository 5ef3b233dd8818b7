package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/prefixgate/prefixgate/internal/loadgen"
	"github.com/prefixgate/prefixgate/internal/sim"
)

// runBench is `prefixgate bench`: live load against an OpenAI-compatible
// endpoint.
func runBench(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o loadgen.Options
	fs.StringVar(&o.URL, "url", "", "base URL of the endpoint (router or replica), e.g. http://127.0.0.1:8080")
	fs.StringVar(&o.Model, "model", "", "model name (default: the first of /v1/models)")
	fs.StringVar(&o.Workload, "workload", "sharegpt", "workload: "+strings.Join(sim.Workloads, ", ")+", or trace:FILE")
	fs.Float64Var(&o.Rate, "rate", 0, "open loop: Poisson arrivals at this many requests per second")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "closed loop: this many clients, each sending the next request when the last finishes")
	fs.IntVar(&o.Requests, "requests", 0, "number of requests")
	fs.DurationVar(&o.Duration, "duration", 0, "run for this long (e.g. 60s)")
	fs.IntVar(&o.MaxTokens, "max-tokens", 0, "cap output tokens per request (0: the workload's)")
	fs.Uint64Var(&o.Seed, "seed", 1, "workload seed")
	asJSON := fs.Bool("json", false, "print exactly one JSON object")
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "Usage: prefixgate bench --url URL (--rate R | --concurrency C) (--requests N | --duration D) [flags]\n\nSend streaming chat load to an OpenAI-compatible endpoint and report TTFT, latency, throughput,\nerrors, per-backend distribution (X-Prefixgate-Backend) and cached tokens. Sends nothing when a\nrequest of the workload would not fit the model's context length (max_model_len in /v1/models);\nexits 1 when any request failed, with no table when every one did.\n\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if _, code, done := parseArgs(fs, args, stdout, stderr, usage); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prefixgate bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := o.Validate(); err != nil {
		// The message names the flag; the package name adds nothing.
		fmt.Fprintf(stderr, "prefixgate bench: %s\n", strings.TrimPrefix(err.Error(), "loadgen: "))
		return 2
	}
	if isTerminal(stderr) {
		bar := newProgressBar(stderr, "bench", true)
		o.Progress = func(done, total int) {
			if total > 0 {
				bar.update(done, total)
			}
		}
		defer bar.finish()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := loadgen.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate bench: %s\n", strings.TrimPrefix(err.Error(), "loadgen: "))
		return 1
	}
	if res.OK == 0 && res.Errors > 0 {
		// A table of zeros would hide that nothing got through.
		fmt.Fprintf(stderr, "prefixgate bench: all %d requests failed; the first: %s\n", res.Errors, res.ErrorSamples[0])
		return 1
	}
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		printBench(stdout, res)
	}
	if res.Errors > 0 {
		return 1
	}
	return 0
}

// printBench writes a run's result as text: the totals, the percentiles,
// the errors seen and each backend's share.
func printBench(stdout io.Writer, res *loadgen.Result) {
	fmt.Fprintf(stdout, "%s, workload %s, %s: %d requests, %d ok, %d errors in %.1f s\n", res.URL, res.Workload, res.Mode, res.Requests, res.OK, res.Errors, res.Elapsed)
	fmt.Fprintf(stdout, "TTFT ms p50 %.1f p90 %.1f p99 %.1f; latency ms p50 %.1f p90 %.1f p99 %.1f; %.2f req/s; cached %.1f%% of %d prompt tokens\n",
		res.TTFT.P50, res.TTFT.P90, res.TTFT.P99, res.Latency.P50, res.Latency.P90, res.Latency.P99, res.Throughput, 100*res.HitRate, res.PromptTokens)
	for _, e := range res.ErrorSamples {
		fmt.Fprintf(stdout, "error: %s\n", e)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\trequests\tshare")
	names := make([]string, 0, len(res.Backends))
	for b := range res.Backends {
		names = append(names, b)
	}
	slices.Sort(names)
	for _, b := range names {
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\n", b, res.Backends[b], 100*float64(res.Backends[b])/float64(max(res.OK, 1)))
	}
	tw.Flush()
}
