package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/prefixgate/prefixgate/normalize"
)

const normalizeUsage = `usage: prefixgate normalize [flags] [FILE|-]

Validates a JSON request body, prints its canonical form (or, with --key, its
routing key) and a newline. Reads FILE, or standard input when FILE is "-" or
missing. Flags may come before or after FILE.

JSONL (one request per line, one result per line) is read with --jsonl, from
a *.jsonl FILE, or when the input is not one JSON value but each of its
non-blank lines is.

Exit status: 0 ok, 1 invalid input, 2 usage error or a FILE that cannot be
read.

flags:
`

// normalizeRun is one run of "prefixgate normalize": its options and where
// it writes.
type normalizeRun struct {
	opts    normalize.Options
	kopts   normalize.KeyOptions
	keyOnly bool
	out     *bufio.Writer
	stderr  io.Writer
	buf     []byte
}

// runNormalize implements "prefixgate normalize".
func runNormalize(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("normalize", flag.ContinueOnError)
	modeName := fs.String("mode", "auto", "request schema: auto, chat, completion, native, responses, messages or pooling")
	group := fs.String("group", "", "group id (default: the body's prompt_cache_key)")
	prefixLen := fs.Int("prefix-length", normalize.DefaultPrefixLength, "routing window N, characters (bytes in native mode), 1024..65536")
	keyOnly := fs.Bool("key", false, "print the routing key instead of the canonical body")
	jsonl := fs.Bool("jsonl", false, "one request per input line; one result per line (the default for *.jsonl files)")
	usage := func(w io.Writer) {
		fmt.Fprint(w, normalizeUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if _, code, done := parseArgs(fs, args, stdout, stderr, usage); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "prefixgate normalize: "+format+"\n", a...)
		return 2
	}
	mode, err := normalize.ParseMode(*modeName)
	if err != nil {
		return fail("%v", err)
	}
	if *prefixLen < normalize.MinPrefixLength || *prefixLen > normalize.MaxPrefixLength {
		return fail("--prefix-length %d is outside %d..%d", *prefixLen, normalize.MinPrefixLength, normalize.MaxPrefixLength)
	}
	if fs.NArg() > 1 {
		fail("want at most one FILE, got %d", fs.NArg())
		fmt.Fprintln(stderr, "run 'prefixgate normalize --help' for usage")
		return 2
	}
	kopts := normalize.KeyOptions{Mode: mode, Group: *group, PrefixLength: *prefixLen}
	if _, err := normalize.RouteKey([]byte(`{}`), kopts); errors.Is(err, normalize.ErrBadOption) {
		return fail("%v", err)
	}
	in := stdin
	if name := fs.Arg(0); name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			// Like lint: 1 is kept for what the input says, 2 for not
			// getting to read it.
			return fail("%v", err)
		}
		defer f.Close()
		in = f
		*jsonl = *jsonl || strings.HasSuffix(name, ".jsonl")
	}
	r := &normalizeRun{opts: normalize.Options{Mode: mode}, kopts: kopts, keyOnly: *keyOnly, out: bufio.NewWriter(stdout), stderr: stderr}
	defer r.out.Flush()
	if *jsonl {
		return r.lines(in)
	}
	return r.document(in)
}

// emit writes the result for one request body.
func (r *normalizeRun) emit(body []byte) error {
	var ri normalize.RouteInfo
	var err error
	r.buf, ri, err = normalize.Normalize(r.buf[:0], body, r.opts, r.kopts)
	if err != nil {
		return err
	}
	if r.keyOnly {
		r.out.WriteString(ri.KeyHex())
	} else {
		r.out.Write(r.buf)
	}
	return r.out.WriteByte('\n')
}

// document handles input that is one request, or JSONL that says so
// unambiguously: not one JSON value, yet a JSON value on each of at least
// two non-blank lines.
func (r *normalizeRun) document(in io.Reader) int {
	body, err := io.ReadAll(in)
	if err != nil {
		fmt.Fprintf(r.stderr, "prefixgate normalize: read: %v\n", err)
		return 1
	}
	err = r.emit(body)
	if err == nil {
		return 0
	}
	if normalize.ErrorCode(err) == normalize.CodeTrailingData && nonBlankLines(body) > 1 {
		if eachLineIsJSON(body) {
			return r.lines(bytes.NewReader(body))
		}
		fmt.Fprintf(r.stderr, "prefixgate normalize: %v (for one request per line, use --jsonl)\n", err)
		return 1
	}
	fmt.Fprintf(r.stderr, "prefixgate normalize: %v\n", err)
	return 1
}

// lines handles JSONL: one request per non-blank line, one result per line.
func (r *normalizeRun) lines(in io.Reader) int {
	status := 0
	br := bufio.NewReaderSize(in, 64<<10)
	for line := 1; ; line++ {
		text, rerr := br.ReadBytes('\n')
		if len(bytes.TrimSpace(text)) > 0 {
			if err := r.emit(text); err != nil {
				r.out.Flush()
				fmt.Fprintf(r.stderr, "prefixgate normalize: line %d: %v\n", line, err)
				status = 1
			}
		}
		if rerr == io.EOF {
			return status
		}
		if rerr != nil {
			fmt.Fprintf(r.stderr, "prefixgate normalize: read: %v\n", rerr)
			return 1
		}
	}
}

// eachLineIsJSON reports whether every non-blank line of data is one JSON
// value on its own, whatever the request schema.
func eachLineIsJSON(data []byte) bool {
	for l := range bytes.SplitSeq(data, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 && normalize.Validate(l, normalize.Options{}) != nil {
			return false
		}
	}
	return true
}
