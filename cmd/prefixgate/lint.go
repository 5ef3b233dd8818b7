package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/normalize/lint"
)

const lintUsage = `usage: prefixgate lint [flags] [FILE|DIR|-]...

Reports what in request bodies would cost prefix cache hits: volatile values
inside the routing window, metadata ahead of the prompt, non-canonical
serialization, short windows, injected dates, related requests that split on
a small difference and keys that carry too much traffic; and suggests a
prefix length for the corpus.

Reads JSON files (one request each), JSONL files (*.jsonl, one request per
line), directories (recursively, *.json and *.jsonl in sorted order), or
standard input ("-" or no arguments; JSON, or JSONL when it holds more than
one value). Invalid JSON is an error finding, not skipped.

Exit status: 0 no finding at --fail-on or above, 1 some finding at or above
--fail-on, 2 usage or I/O error.

flags:
`

// lintInput is one request read from the corpus and where it came from.
type lintInput struct {
	body []byte
	loc  lint.Location
}

// runLint implements "prefixgate lint".
func runLint(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("lint", flag.ContinueOnError)
	modeName := fset.String("mode", "auto", "request schema: auto, chat, completion, native, responses, messages or pooling")
	prefixLen := fset.Int("prefix-length", normalize.DefaultPrefixLength, "routing window N, characters (bytes in native mode), 1024..65536")
	replicas := fset.Int("replicas", lint.DefaultReplicas, "replicas the router spreads over (hot-key rule, balance estimate)")
	direct := fset.Bool("direct", false, "traffic reaches a byte-prefix router without the normalizer: noncanonical is a warning")
	format := fset.String("format", "text", "output: text, json or sarif")
	failOn := fset.String("fail-on", "warning", "exit 1 when a finding reaches this severity: info, warning or error")
	usage := func(w io.Writer) {
		fmt.Fprint(w, lintUsage)
		fset.SetOutput(w)
		fset.PrintDefaults()
		fset.SetOutput(io.Discard)
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "prefixgate lint: "+format+"\n", a...)
		return 2
	}
	// Flags may come before or after the inputs.
	inputs, code, done := parseArgs(fset, args, stdout, stderr, usage)
	if done {
		return code
	}
	mode, err := normalize.ParseMode(*modeName)
	if err != nil {
		return fail("%v", err)
	}
	if *prefixLen < normalize.MinPrefixLength || *prefixLen > normalize.MaxPrefixLength {
		return fail("--prefix-length %d is outside %d..%d", *prefixLen, normalize.MinPrefixLength, normalize.MaxPrefixLength)
	}
	if *replicas < 1 {
		return fail("--replicas %d must be at least 1", *replicas)
	}
	threshold, err := lint.ParseSeverity(*failOn)
	if err != nil {
		return fail("--fail-on: %v", err)
	}
	switch *format {
	case "text", "json", "sarif":
	default:
		return fail("--format %q: want text, json or sarif", *format)
	}
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	var corpus []lintInput
	for _, in := range inputs {
		got, err := readLintInput(in, stdin)
		if err != nil {
			return fail("%v", err)
		}
		corpus = append(corpus, got...)
	}
	bodies := make([][]byte, len(corpus))
	for i, c := range corpus {
		bodies[i] = c.body
	}
	rep, err := lint.Check(bodies, lint.Options{Mode: mode, PrefixLength: *prefixLen, Replicas: *replicas, Direct: *direct})
	if err != nil {
		return fail("%v", err)
	}
	if err := writeLintReport(stdout, *format, rep, corpus); err != nil {
		return fail("write: %v", err)
	}
	if rep.Failed(threshold) {
		return 1
	}
	return 0
}

// writeLintReport writes rep in format, locating findings in corpus.
func writeLintReport(w io.Writer, format string, rep *lint.Report, corpus []lintInput) error {
	locate := func(i int) (lint.Location, bool) {
		if i < 0 || i >= len(corpus) {
			return lint.Location{}, false
		}
		return corpus[i].loc, true
	}
	switch format {
	case "json":
		return lint.WriteJSON(w, rep)
	case "sarif":
		return lint.WriteSARIF(w, rep, locate, version())
	default:
		return lint.WriteText(w, rep, locate, wantsColor(w))
	}
}

// wantsColor reports whether w is a character device (a terminal), the
// only place colour belongs.
func wantsColor(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// readLintInput reads one argument: standard input, a file or a directory.
func readLintInput(name string, stdin io.Reader) ([]lintInput, error) {
	if name == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		// One JSON value, or JSONL when it is not a single value and has
		// more than one non-blank line.
		if normalize.Validate(data, normalize.Options{}) != nil && nonBlankLines(data) > 1 {
			return splitLines("stdin", data), nil
		}
		return []lintInput{{body: data, loc: lint.Location{URI: "stdin", Line: 1, Column: 1, Body: data}}}, nil
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return readLintFile(name)
	}
	var files []string
	err = filepath.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".jsonl")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []lintInput
	for _, f := range files {
		got, err := readLintFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

func readLintFile(name string) ([]lintInput, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	uri := filepath.ToSlash(name)
	if strings.HasSuffix(name, ".jsonl") {
		return splitLines(uri, data), nil
	}
	return []lintInput{{body: data, loc: lint.Location{URI: uri, Line: 1, Column: 1, Body: data}}}, nil
}

// splitLines makes one request of each non-blank line.
func splitLines(uri string, data []byte) []lintInput {
	var out []lintInput
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimRight(sc.Bytes(), "\r")
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		body := append([]byte(nil), text...)
		out = append(out, lintInput{body: body, loc: lint.Location{URI: uri, Line: line, Column: 1, Body: body}})
	}
	return out
}

func nonBlankLines(data []byte) int {
	n := 0
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			n++
		}
	}
	return n
}
