package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sdkRoot is the SDKs' directory, from this package's.
const sdkRoot = "../../clients"

// TestSDKCommandNames: the router binary is prefixgate; each SDK's command
// has its own name, so that installing an SDK never shadows the router.
func TestSDKCommandNames(t *testing.T) {
	var pkg struct {
		Bin map[string]string `json:"bin"`
	}
	readJSON(t, filepath.Join(sdkRoot, "typescript", "package.json"), &pkg)
	py := pyprojectSection(t, "scripts")
	gos, err := os.ReadDir(filepath.Join(sdkRoot, "go", "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	add := func(sdk, name string) {
		if name == "prefixgate" {
			t.Errorf("%s SDK installs a command named prefixgate, the router binary's name", sdk)
		}
		if other, ok := names[name]; ok {
			t.Errorf("%s and %s SDKs both install %s", other, sdk, name)
		}
		names[name] = sdk
	}
	for n := range pkg.Bin {
		add("TypeScript", n)
	}
	for _, line := range py {
		if n, _, ok := strings.Cut(line, "="); ok {
			add("Python", strings.TrimSpace(n))
		}
	}
	for _, d := range gos {
		add("Go", d.Name())
	}
	for _, want := range []string{"prefixgate-ts", "prefixgate-py", "prefixgate-go"} {
		if names[want] == "" {
			t.Errorf("no SDK installs %s (have %v); docs/sdk.md names it", want, names)
		}
	}
}

// TestSDKDependencyRanges: published metadata takes compatible ranges for
// runtime dependencies; the exact versions stay in the lock files, which
// must agree with the manifests.
func TestSDKDependencyRanges(t *testing.T) {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	readJSON(t, filepath.Join(sdkRoot, "typescript", "package.json"), &pkg)
	var lock struct {
		Packages map[string]struct {
			Version      string            `json:"version"`
			Dependencies map[string]string `json:"dependencies"`
		} `json:"packages"`
	}
	readJSON(t, filepath.Join(sdkRoot, "typescript", "package-lock.json"), &lock)
	exact := regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	for dep, spec := range pkg.Dependencies {
		if exact.MatchString(spec) {
			t.Errorf("package.json pins %s to %s exactly; want a range such as ^%s", dep, spec, spec)
		}
		if got := lock.Packages[""].Dependencies[dep]; got != spec {
			t.Errorf("package-lock.json records %s as %q, package.json says %q: run npm install --package-lock-only", dep, got, spec)
		}
		if v := lock.Packages["node_modules/"+dep].Version; !exact.MatchString(v) || !caretAllows(spec, v) {
			t.Errorf("package-lock.json locks %s at %q, outside %s", dep, v, spec)
		}
	}
	lockPins := map[string]string{}
	data, err := os.ReadFile(filepath.Join(sdkRoot, "python", "requirements-dev.lock"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if n, v, ok := strings.Cut(strings.TrimSpace(l), "=="); ok {
			lockPins[strings.ToLower(n)] = v
		}
	}
	deps := pyprojectList(t, "dependencies")
	if len(deps) == 0 {
		t.Fatal("no dependencies found in pyproject.toml")
	}
	spec := regexp.MustCompile(`^([A-Za-z0-9_.-]+)>=([0-9.]+),<([0-9.]+)$`)
	for _, d := range deps {
		m := spec.FindStringSubmatch(d)
		if m == nil {
			t.Errorf("pyproject.toml dependency %q: want NAME>=LOW,<HIGH", d)
			continue
		}
		pin, ok := lockPins[strings.ToLower(m[1])]
		if !ok {
			t.Errorf("requirements-dev.lock does not pin %s", m[1])
			continue
		}
		if versionLess(pin, m[2]) || !versionLess(pin, m[3]) {
			t.Errorf("requirements-dev.lock pins %s==%s, outside >=%s,<%s", m[1], pin, m[2], m[3])
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// pyprojectSection returns the lines of [project.NAME] in pyproject.toml.
func pyprojectSection(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sdkRoot, "python", "pyproject.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			in = l == "[project."+name+"]"
			continue
		}
		if in && l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// pyprojectList returns the strings of the [project] array NAME.
func pyprojectList(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sdkRoot, "python", "pyproject.toml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "\n"+name+" = [")
	if i < 0 {
		return nil
	}
	body, _, _ := strings.Cut(s[i+len(name)+5:], "]")
	var out []string
	for _, l := range strings.Split(body, "\n") {
		l = strings.Trim(strings.TrimSpace(l), `",`)
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// versionLess compares dotted numeric versions.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x = atoiOr0(pa[i])
		}
		if i < len(pb) {
			y = atoiOr0(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func atoiOr0(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// caretAllows reports whether version v satisfies an npm caret range ^X.Y.Z
// (for X ≥ 1: same major, not below).
func caretAllows(spec, v string) bool {
	low, ok := strings.CutPrefix(spec, "^")
	if !ok {
		return false
	}
	return strings.Split(low, ".")[0] == strings.Split(v, ".")[0] && !versionLess(v, low)
}
