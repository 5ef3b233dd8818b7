package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A fenced block in README.md or docs/*.md runs in this test when the line
// before it (blank lines aside) is
//
//	<!-- test: offline -->            the block must exit 0
//	<!-- test: offline exit=N -->     the block must exit N
//
// and its output (standard output and error together, trailing spaces
// ignored) must equal the next fenced block when that one is marked
// <!-- test: output -->. Blocks run in bash with pipefail, each in its own
// empty directory, with the binary built from this tree first on PATH as
// prefixgate, and no network: they are the commands a reader can paste.
var (
	offlineMark = regexp.MustCompile(`^<!-- test: offline(?: exit=(\d+))? -->$`)
	outputMark  = regexp.MustCompile(`^<!-- test: output -->$`)
)

type docBlock struct {
	file   string
	line   int
	script string
	exit   int
	output *string
}

// docBlocks returns the marked blocks of one Markdown file.
func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	// fence returns the body of the fenced block that starts at or after
	// line i (skipping blank lines) and the line after it.
	fence := func(i int) (body string, start, next int, ok bool) {
		for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
			i++
		}
		if i >= len(lines) || !strings.HasPrefix(lines[i], "```") {
			return "", 0, i, false
		}
		start = i + 1
		for j := start; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], "```") {
				return strings.Join(lines[start:j], "\n"), start, j + 1, true
			}
		}
		return "", 0, len(lines), false
	}
	var out []docBlock
	for i := 0; i < len(lines); i++ {
		m := offlineMark.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		script, start, next, ok := fence(i + 1)
		if !ok {
			t.Errorf("%s:%d: test mark without a fenced block after it", path, i+1)
			continue
		}
		b := docBlock{file: path, line: start, script: script}
		if m[1] != "" {
			b.exit, _ = strconv.Atoi(m[1])
		}
		j := next
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j < len(lines) && outputMark.MatchString(strings.TrimSpace(lines[j])) {
			want, _, after, ok := fence(j + 1)
			if !ok {
				t.Errorf("%s:%d: output mark without a fenced block after it", path, j+1)
			}
			b.output = &want
			next = after
		}
		out = append(out, b)
		i = next - 1
	}
	return out
}

func trimLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(lines, "\n")
}

// TestDocsCommandsRun runs every block marked runnable offline.
func TestDocsCommandsRun(t *testing.T) {
	bin := t.TempDir()
	if err := os.Symlink(binary(t), filepath.Join(bin, "prefixgate")); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	total := 0
	for _, f := range files {
		for _, b := range docBlocks(t, f) {
			total++
			name := fmt.Sprintf("%s:%d", strings.TrimPrefix(b.file, "../../"), b.line)
			t.Run(name, func(t *testing.T) {
				cmd := exec.CommandContext(t.Context(), "bash", "-o", "pipefail", "-c", b.script)
				cmd.Dir = t.TempDir()
				cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
				out, err := cmd.CombinedOutput()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				if code != b.exit {
					t.Errorf("exit %d, want %d; output:\n%s", code, b.exit, out)
				}
				if b.output != nil && trimLines(string(out)) != trimLines(*b.output) {
					t.Errorf("output differs from the docs.\ngot:\n%s\nwant:\n%s", out, *b.output)
				}
			})
		}
	}
	// The convention must be in use: a test that finds nothing to run
	// would pass while the docs drift.
	if total < 4 {
		t.Errorf("%d blocks marked <!-- test: offline -->, want at least 4", total)
	}
}

// TestDocBlocksParse checks the marker convention itself.
func TestDocBlocksParse(t *testing.T) {
	md := "text\n<!-- test: offline exit=2 -->\n\n```sh\necho hi\nexit 2\n```\n<!-- test: output -->\n```\nhi\n```\n" +
		"```sh\nnot marked\n```\n<!-- test: offline -->\n```\ntrue\n```\n"
	p := filepath.Join(t.TempDir(), "x.md")
	if err := os.WriteFile(p, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	bs := docBlocks(t, p)
	if len(bs) != 2 {
		t.Fatalf("%d blocks, want 2: %+v", len(bs), bs)
	}
	if bs[0].script != "echo hi\nexit 2" || bs[0].exit != 2 || bs[0].output == nil || *bs[0].output != "hi" {
		t.Errorf("first block %+v", bs[0])
	}
	if bs[1].script != "true" || bs[1].exit != 0 || bs[1].output != nil {
		t.Errorf("second block %+v", bs[1])
	}
}
