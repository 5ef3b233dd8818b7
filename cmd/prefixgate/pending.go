package main

import (
	"fmt"
	"io"
)

// pending answers for a subcommand whose issue has not landed: it says so
// and exits non-zero, and never prints invented numbers.
func pending(name, issue, summary string) func([]string, io.Reader, io.Writer, io.Writer) int {
	return func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
		for _, a := range args {
			if a == "-h" || a == "-help" || a == "--help" {
				fmt.Fprintf(stdout, "Usage: prefixgate %s\n\n%s\n\nNot available in this build yet (%s).\n", name, summary, issue)
				return 0
			}
		}
		fmt.Fprintf(stderr, "prefixgate %s: not available in this build yet (%s)\n", name, issue)
		return 3
	}
}
