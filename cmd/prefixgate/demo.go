package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/prefixgate/prefixgate/internal/demo"
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
	opts.Policies = strings.Split(*policies, ",")
	opts.Progress = stderr
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintln(stderr, "prefixgate demo: running each policy against a cold simulated fleet…")
	results, err := demo.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	demo.PrintTable(stdout, opts, results)
	return 0
}
