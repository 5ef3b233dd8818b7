package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// semVer is Semantic Versioning 2.0's own regular expression (semver.org).
var semVer = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

func TestVersionOf(t *testing.T) {
	const rev = "d6035f8abcde0123456789abcdef0123456789ab"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		what     string
		main     string
		settings []debug.BuildSetting
		want     string
	}{
		{"go build without a VCS stamp", "(devel)", nil, baseVersion + "-dev"},
		{"go build in a clean checkout", "(devel)", vcs("false"), baseVersion + "-dev+d6035f8abcde"},
		{"go build with uncommitted changes", "(devel)", vcs("true"), baseVersion + "-dev+d6035f8abcde.dirty"},
		{"go build at a commit past a tag", "v0.3.1-0.20261202005926-d6035f8abcde+dirty", vcs("true"), baseVersion + "-dev+d6035f8abcde.dirty"},
		{"go build at a tag", "v0.3.0", vcs("false"), "0.3.0"},
		{"go install at a release", "v0.3.0", nil, "0.3.0"},
		{"go install at a commit", "v0.0.0-20261202005926-d6035f8abcde", nil, "0.0.0-20261202005926-d6035f8abcde"},
		{"no module version", "", nil, baseVersion + "-dev"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/prefixgate/prefixgate", Version: tc.main}, Settings: tc.settings}
		got := versionOf(bi)
		if got != tc.want {
			t.Errorf("%s: version %q, want %q", tc.what, got, tc.want)
		}
		if !semVer.MatchString(got) {
			t.Errorf("%s: version %q is not Semantic Versioning 2.0", tc.what, got)
		}
	}
	if !semVer.MatchString(baseVersion) {
		t.Errorf("baseVersion %q is not Semantic Versioning 2.0", baseVersion)
	}
}

// TestPrintedVersionsAreSemVer: --version and SARIF's tool.driver.version
// (which the SARIF Multitool checks, rule SARIF2005) carry the same
// Semantic Versioning 2.0 version.
func TestPrintedVersionsAreSemVer(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--version"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("--version: exit %d, stderr %s", code, errb.String())
	}
	printed, ok := strings.CutPrefix(strings.TrimSpace(out.String()), "prefixgate ")
	if !ok || !semVer.MatchString(printed) {
		t.Fatalf("--version printed %q, want prefixgate and a Semantic Versioning 2.0 version", out.String())
	}
	_, sarif, errs := lintCLI(t, volatileChat, "--format", "sarif")
	var log struct {
		Runs []struct {
			Tool struct {
				Driver struct {
					Version string `json:"version"`
				} `json:"driver"`
			} `json:"tool"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(sarif), &log); err != nil || len(log.Runs) != 1 {
		t.Fatalf("SARIF output %s (stderr %s): %v", sarif, errs, err)
	}
	if got := log.Runs[0].Tool.Driver.Version; got != printed {
		t.Errorf("SARIF tool.driver.version %q, want %q as --version prints", got, printed)
	}
}
