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
	fmt.Fprintln(w, "Run 'prefixgate help <command>' or 'prefixgate <command> --help' for the flags")
	fmt.Fprintln(w, "of a command, 'prefixgate --version' for the version.")
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
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "help":
		// "prefixgate help serve" is "prefixgate serve --help".
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		if len(args) > 2 {
			fmt.Fprintf(stderr, "prefixgate help: want one command, got %d\n", len(args)-1)
			return 2
		}
		return run([]string{args[1], "--help"}, stdin, stdout, stderr)
	case "-version", "--version", "version":
		fmt.Fprintf(stdout, "prefixgate %s\n", version())
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "prefixgate: unknown command %q", args[0])
	best, bestDist := "", 3
	for _, c := range commands() {
		if d := editDistance(args[0], c.name); d < bestDist {
			best, bestDist = c.name, d
		}
	}
	if best != "" {
		fmt.Fprintf(stderr, " (did you mean %s?)", best)
	}
	fmt.Fprintln(stderr, "\nrun 'prefixgate --help' for the commands")
	return 2
}
