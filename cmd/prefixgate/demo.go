package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/prefixgate/prefixgate/internal/demo"
	"github.com/prefixgate/prefixgate/route"
)

func runDemo(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts demo.Options
	policies := fs.String("policies", "random,least-outstanding,consistent-hash,prefix-aware,prefix-index", "comma-separated routing policies to compare")
	fs.IntVar(&opts.Replicas, "replicas", 7, "simulated vLLM replicas")
	fs.IntVar(&opts.Requests, "requests", 420, "requests per policy")
	fs.IntVar(&opts.Concurrency, "concurrency", 14, "requests in flight at once")
	fs.IntVar(&opts.Documents, "documents", 28, "shared documents the requests start with")
	fs.Float64Var(&opts.Speed, "speed", 10, "simulated clock speed-up")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: prefixgate demo [flags]")
		fmt.Fprintln(fs.Output(), "\nStarts simulated vLLM replicas and the router on loopback, sends a")
		fmt.Fprintln(fs.Output(), "long-context workload through real HTTP once per policy, and prints a")
		fmt.Fprintln(fs.Output(), "table comparing hit rate, TTFT and balance.\n\nFlags:")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prefixgate demo: unexpected argument %q\nrun 'prefixgate demo --help' for usage\n", fs.Arg(0))
		return 2
	}
	// Check every setting before announcing the run.
	for _, p := range strings.Split(*policies, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(route.Policies(), p) {
			fmt.Fprintf(stderr, "prefixgate demo: --policies: %q is not a routing policy (have %s)\n", p, strings.Join(route.Policies(), ", "))
			return 2
		}
		opts.Policies = append(opts.Policies, p)
	}
	if opts.Replicas < 1 || opts.Requests < 1 || opts.Concurrency < 1 || opts.Documents < 1 || !(opts.Speed > 0) {
		fmt.Fprintln(stderr, "prefixgate demo: --replicas, --requests, --concurrency and --documents must be at least 1, --speed positive")
		return 2
	}
	opts.Progress = stderr
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintln(stderr, "prefixgate demo: running each policy against a cold simulated fleet…")
	results, err := demo.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate demo: %v\n", err)
		return 1
	}
	demo.PrintTable(stdout, opts, results)
	return 0
}
