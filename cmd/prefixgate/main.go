// Command prefixgate is the prefixgate binary: the router (serve), the
// endpoint picker for Envoy-based gateways (epp), the embedded demo fleet
// (demo), the normalizer (normalize), the prompt linter (lint), the fleet
// simulator (sim), the simulated vLLM (vllmsim) and the load generator
// (bench).
package main

import (
	"fmt"
	"io"
	"os"
)

// command is one subcommand: its name, a one-line summary, and its entry
// point, which returns the process exit status.
type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "run the router in front of vLLM backends", runServe},
		{"demo", "run a simulated vLLM fleet behind the router and compare routing policies", runDemo},
		{"normalize", "print the canonical form or routing key of JSON requests", runNormalize},
		{"lint", "report what in prompts would cost prefix cache hits", runLint},
		{"sim", "simulate a fleet in virtual time and compare routing policies", runSim},
		{"vllmsim", "serve simulated vLLM replicas", runVLLMSim},
		{"epp", "pick endpoints for an Envoy-based gateway (Gateway API Inference Extension)", runEPP},
		{"bench", "send load to an OpenAI-compatible endpoint and report latency", runBench},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "prefixgate: a prefix-aware router for vLLM fleets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: prefixgate <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'prefixgate <command> --help' for the flags of a command.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "prefixgate: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}
