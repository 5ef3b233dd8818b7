package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A Go or Python snippet in README.md, docs/*.md or an SDK's README is a
// whole program a reader can paste: TestDocsGoSnippets builds every ```go
// block in a module of its own outside the repository, as docs/sdk.md tells
// a user to, and runs it against a router; TestDocsPythonSnippets compiles
// and runs every ```python block when PREFIXGATE_E2E_PYTHON names the Python
// that `make test` sets up.

type snippet struct {
	name string // file:line of the block's first line
	body string
}

// fencedBlocks returns the blocks of one Markdown file whose opening fence
// is exactly "```"+lang, and the block that follows the line mark, if any.
func fencedBlocks(t *testing.T, path, lang, mark string) (blocks []snippet, marked *snippet) {
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
	name := strings.TrimPrefix(path, "../../")
	afterMark := false
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if mark != "" && line == mark {
			afterMark = true
			continue
		}
		if !strings.HasPrefix(line, "```") {
			if line != "" {
				afterMark = false
			}
			continue
		}
		open := strings.TrimPrefix(line, "```")
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
			j++
		}
		b := snippet{name: fmt.Sprintf("%s:%d", name, i+2), body: strings.Join(lines[i+1:j], "\n") + "\n"}
		switch {
		case afterMark:
			marked = &b
		case open == lang:
			blocks = append(blocks, b)
		}
		afterMark = false
		i = j
	}
	return blocks, marked
}

// docFiles lists README.md, docs/*.md and the SDKs' READMEs, relative to
// this package.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md", "../../clients/go/README.md", "../../clients/python/README.md"}, files...)
}

// quickStartURL is the router address the docs' programs use; the tests
// point it at their own router.
const quickStartURL = "http://127.0.0.1:8080"

// docsRouter starts a two-replica simulated fleet and `prefixgate serve`
// in front of it, for the snippets' live calls.
func docsRouter(t *testing.T) string {
	t.Helper()
	fleet := startFleet(t, 2)
	_, base, _ := startServe(t, "--backend", strings.Join(fleet.URLs(), ","))
	return base
}

// TestDocsGoSnippets builds every Go snippet in the docs as a program of a
// module outside the repository whose go.mod is the one docs/sdk.md shows,
// its replace pointed at this repository, and runs it with PREFIXGATE_URL
// set (and quickStartURL replaced) to reach a router. The module proxy is off: the SDK's dependencies come from the module
// cache this repository's own build fills, checked against its go.sum.
func TestDocsGoSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var progs []snippet
	for _, f := range docFiles(t) {
		blocks, _ := fencedBlocks(t, f, "go", "")
		for _, b := range blocks {
			if !strings.HasPrefix(b.body, "package main\n") {
				t.Errorf("%s: a Go snippet must be a whole program starting with \"package main\"", b.name)
				continue
			}
			progs = append(progs, b)
		}
	}
	if len(progs) < 2 {
		t.Fatalf("%d Go programs in the docs, want at least 2 (docs/sdk.md, docs/routing.md)", len(progs))
	}
	_, gomod := fencedBlocks(t, "../../docs/sdk.md", "", "<!-- test: go.mod -->")
	const replaceLine = "replace github.com/prefixgate/prefixgate => ../prefixgate\n"
	if gomod == nil || !strings.Contains(gomod.body, replaceLine) {
		t.Fatalf("docs/sdk.md has no go.mod block marked <!-- test: go.mod --> with %q", replaceLine)
	}
	dir := t.TempDir()
	if rel, err := filepath.Rel(root, dir); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("temporary module %s is inside the repository", dir)
	}
	mod := strings.Replace(gomod.body, replaceLine, "replace github.com/prefixgate/prefixgate => "+root+"\n", 1)
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	base := docsRouter(t)
	write("go.mod", mod)
	write("go.sum", string(sum))
	for i, p := range progs {
		write(fmt.Sprintf("s%d/main.go", i), strings.ReplaceAll(p.body, quickStartURL, base))
	}
	build := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(dir, "bin")+string(os.PathSeparator), "./...")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS="+withModMod(os.Getenv("GOFLAGS")), "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the docs' Go snippets in a module of their own: %v\n%s", err, out)
	}
	for i, p := range progs {
		t.Run(p.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "bin", fmt.Sprintf("s%d", i)))
			cmd.Env = append(os.Environ(), "PREFIXGATE_URL="+base)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%v; output:\n%s", err, out)
			}
			t.Logf("output:\n%s", out)
		})
	}
}

// TestDocsPythonSnippets compiles every Python snippet in the docs, checks
// it with ruff's pyflakes rules (an undefined name fails), and runs it with
// PREFIXGATE_URL set; a snippet that talks to the quick start's router
// (quickStartURL) is pointed at the test's router instead.
func TestDocsPythonSnippets(t *testing.T) {
	py := os.Getenv("PREFIXGATE_E2E_PYTHON")
	if py == "" {
		t.Skip("PREFIXGATE_E2E_PYTHON is unset: `make test` sets it to the SDK's virtual environment")
	}
	var progs []snippet
	for _, f := range docFiles(t) {
		blocks, _ := fencedBlocks(t, f, "python", "")
		progs = append(progs, blocks...)
	}
	if len(progs) < 3 {
		t.Fatalf("%d Python snippets in the docs, want at least 3 (README.md, docs/sdk.md)", len(progs))
	}
	dir := t.TempDir()
	var files []string
	for i, p := range progs {
		f := filepath.Join(dir, fmt.Sprintf("s%d.py", i))
		if err := os.WriteFile(f, []byte(p.body), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		if out, err := exec.CommandContext(t.Context(), py, "-m", "py_compile", f).CombinedOutput(); err != nil {
			t.Errorf("%s: py_compile: %v\n%s", p.name, err, out)
		}
	}
	if ruff := filepath.Join(filepath.Dir(py), "ruff"); fileExists(ruff) {
		args := append([]string{"check", "--no-cache", "--isolated", "--select", "F", "--line-length", "120"}, files...)
		if out, err := exec.CommandContext(t.Context(), ruff, args...).CombinedOutput(); err != nil {
			t.Errorf("ruff (pyflakes rules) on the docs' Python snippets (s<i>.py is snippet i of %v): %v\n%s", snippetNames(progs), err, out)
		}
	}
	base := docsRouter(t)
	for i, p := range progs {
		t.Run(p.name, func(t *testing.T) {
			body := strings.ReplaceAll(p.body, quickStartURL, base)
			f := filepath.Join(dir, fmt.Sprintf("run%d.py", i))
			if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), py, f)
			cmd.Env = append(os.Environ(), "PREFIXGATE_URL="+base)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%v; output:\n%s", err, out)
			}
		})
	}
}

// withModMod returns GOFLAGS with -mod=mod in place of any -mod setting:
// the snippets' module lists only the SDK, and the go command adds the
// requirements it implies from the module cache.
func withModMod(goflags string) string {
	flags := []string{"-mod=mod"}
	for _, f := range strings.Fields(goflags) {
		if !strings.HasPrefix(f, "-mod=") && !strings.HasPrefix(f, "--mod=") {
			flags = append(flags, f)
		}
	}
	return strings.Join(flags, " ")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func snippetNames(s []snippet) []string {
	names := make([]string, len(s))
	for i, p := range s {
		names[i] = p.name
	}
	return names
}

func TestWithModMod(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "-mod=mod",
		"-buildvcs=false":            "-mod=mod -buildvcs=false",
		"-mod=readonly -trimpath":    "-mod=mod -trimpath",
		"--mod=vendor -mod=readonly": "-mod=mod",
	} {
		if got := withModMod(in); got != want {
			t.Errorf("withModMod(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFencedBlocks checks the fence scanner on a small page.
func TestFencedBlocks(t *testing.T) {
	md := "# t\n```go\npackage main\n```\n<!-- m -->\n```\nmodule x\n```\n```python\nprint(1)\n```\n```\nplain\n```\n```go\nfunc f()\n```\n"
	p := filepath.Join(t.TempDir(), "x.md")
	if err := os.WriteFile(p, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	goBlocks, marked := fencedBlocks(t, p, "go", "<!-- m -->")
	if len(goBlocks) != 2 || goBlocks[0].body != "package main\n" || goBlocks[1].body != "func f()\n" {
		t.Errorf("go blocks %+v", goBlocks)
	}
	if marked == nil || marked.body != "module x\n" {
		t.Errorf("marked block %+v", marked)
	}
	py, _ := fencedBlocks(t, p, "python", "")
	if len(py) != 1 || py[0].body != "print(1)\n" {
		t.Errorf("python blocks %+v", py)
	}
}
