// Command prefixgate-go is the Go SDK's command line: it canonicalizes
// request bodies, computes routing keys and builds prompts locally, byte for
// byte as the router and the Python and TypeScript SDKs do.
//
//	prefixgate-go canonicalize [--mode M]                         < body.json
//	prefixgate-go key [--mode M] [--group G] [--prefix-length N]  < body.json
//	prefixgate-go build [--mode chat|responses|messages]          < spec.json
//
// Each reads standard input and writes one result and a newline. Exit status:
// 0 ok, 1 invalid input ("offset N: reason" on standard error), 2 usage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prefixgate/prefixgate/clients/go/prefixgate"
)

const usage = `usage: prefixgate-go COMMAND [flags] < input

commands:
  canonicalize [--mode M]                          canonical form of a request body
  key [--mode M] [--group G] [--prefix-length N]   routing key, 16 hex digits
  build [--mode M]                                 request built from a prompt spec, canonical:
                                                   chat (default), responses or messages

modes: auto (default), chat, completion, native, responses, messages, pooling
`

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprint(w, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd := args[0]
	kopts, code, ok := parseFlags(cmd, args[1:], stderr)
	if !ok {
		return code
	}
	in, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "prefixgate-go %s: %v\n", cmd, err)
		return 1
	}
	var out []byte
	switch cmd {
	case "canonicalize":
		out, err = prefixgate.Canonicalize(in, kopts.Mode)
	case "key":
		var ri prefixgate.RouteInfo
		if ri, err = prefixgate.Key(in, kopts); err == nil {
			out = []byte(ri.KeyHex())
		}
	case "build":
		out, err = prefixgate.BuildJSONAs(in, kopts.Mode)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	out = append(out, '\n')
	if _, err := stdout.Write(out); err != nil {
		return 1
	}
	return 0
}

// parseFlags reads the flags of cmd into key options, checked before any
// input is read so that a bad flag is a usage error whatever the body.
// When ok is false the command ends with exit status code.
func parseFlags(cmd string, args []string, stderr io.Writer) (kopts prefixgate.KeyOptions, code int, ok bool) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var modeName, group *string
	var prefixLen *int
	switch cmd {
	case "canonicalize":
		modeName = fs.String("mode", "auto", "request schema: auto, chat, completion, native, responses, messages or pooling")
	case "key":
		modeName = fs.String("mode", "auto", "request schema: auto, chat, completion, native, responses, messages or pooling")
		group = fs.String("group", "", "group id (default: the body's prompt_cache_key)")
		prefixLen = fs.Int("prefix-length", 0, "routing window N, 1024..65536 (default 4096)")
	case "build":
		modeName = fs.String("mode", "chat", "request to build: chat, responses or messages")
	default:
		fmt.Fprintf(stderr, "prefixgate-go: unknown command %q\n%s", cmd, usage)
		return kopts, 2, false
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return kopts, 0, false
		}
		return kopts, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prefixgate-go %s: unexpected argument %q (input is read from standard input)\n", cmd, fs.Arg(0))
		return kopts, 2, false
	}
	kopts.Mode = prefixgate.ModeAuto
	if modeName != nil {
		m, err := prefixgate.ParseMode(*modeName)
		if err != nil {
			fmt.Fprintf(stderr, "prefixgate-go %s: %v\n", cmd, err)
			return kopts, 2, false
		}
		if cmd == "build" && m != prefixgate.ModeChat && m != prefixgate.ModeResponses && m != prefixgate.ModeMessages {
			fmt.Fprintf(stderr, "prefixgate-go build: --mode %s: a prompt spec builds chat, responses or messages requests\n", m)
			return kopts, 2, false
		}
		kopts.Mode = m
	}
	if group != nil {
		kopts.Group, kopts.PrefixLength = *group, *prefixLen
		if _, err := prefixgate.Key([]byte(`{}`), prefixgate.KeyOptions{Mode: prefixgate.ModeNative, Group: kopts.Group, PrefixLength: kopts.PrefixLength}); err != nil {
			fmt.Fprintf(stderr, "prefixgate-go %s: %v\n", cmd, err)
			return kopts, 2, false
		}
	}
	return kopts, 0, true
}
