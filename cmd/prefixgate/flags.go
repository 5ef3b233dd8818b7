package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseArgs parses a subcommand's flags, which may come before, between or
// after its positional arguments ("--" ends the flags), and returns the
// positional arguments. --help prints usage to stdout and ends with 0; a
// bad flag prints one line naming it (with the closest flag when it is
// unknown) and a pointer to --help on stderr, and ends with 2.
func parseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, usage func(io.Writer)) (pos []string, code int, done bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage(stdout)
				return nil, 0, true
			}
			fmt.Fprintf(stderr, "prefixgate %s: %s\n", fs.Name(), flagError(fs, err))
			fmt.Fprintf(stderr, "run 'prefixgate %s --help' for usage\n", fs.Name())
			return nil, 2, true
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		// Parse consumed a "--" when it sits right before what is left.
		if n := len(rest) - len(left); n > 0 && rest[n-1] == "--" {
			pos = append(pos, left...)
			break
		}
		pos = append(pos, left[0])
		rest = left[1:]
	}
	// Leave the positional arguments in fs.Args() too.
	_ = fs.Parse(append([]string{"--"}, pos...))
	return pos, 0, false
}

// parseFlags is parseArgs for commands whose usage is fs.Usage writing to
// fs.Output(): it reports errors to the writer fs.Output() was set to.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, done bool) {
	stderr, show := fs.Output(), fs.Usage
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		show()
		fs.SetOutput(io.Discard)
	}
	_, code, done = parseArgs(fs, args, stdout, stderr, usage)
	return code, done
}

// flagError rewrites the flag package's errors in the spelling the usage
// text uses (--name), and suggests the closest flag for an unknown one.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	const unknown = "flag provided but not defined: -"
	if name, ok := strings.CutPrefix(msg, unknown); ok {
		name = strings.TrimPrefix(name, "-")
		if best := closestFlag(fs, name); best != "" {
			return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, best)
		}
		return fmt.Sprintf("unknown flag --%s", name)
	}
	// "invalid value "x" for flag -n: ..." and "flag needs an argument: -n".
	msg = strings.Replace(msg, " for flag -", " for flag --", 1)
	msg = strings.Replace(msg, "needs an argument: -", "needs an argument: --", 1)
	return msg
}

// closestFlag returns the defined flag nearest to name: one it starts or
// is started by, or else the one within a small edit distance.
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestDist := "", max(1, len(name)/3)+1
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(strings.ToLower(name), f.Name)
		if len(name) >= 3 && (strings.HasPrefix(f.Name, name) || strings.HasPrefix(name, f.Name)) {
			d = min(d, 1)
		}
		if d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes. Flag names
// are short, but the name typed is not bounded, so it is cut first.
func editDistance(a, b string) int {
	if len(a) > 64 {
		a = a[:64]
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
