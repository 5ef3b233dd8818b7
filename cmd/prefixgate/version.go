package main

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// baseVersion is the release this source tree is, or is heading to: the
// one place the project's semantic version is written. A build from a
// checkout reports it as a pre-release, baseVersion-dev.
const baseVersion = "0.3.0"

// version is this binary's Semantic Versioning 2.0 version, printed by
// --version and written as SARIF's tool.driver.version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return baseVersion + "-dev"
	}
	return versionOf(bi)
}

// pseudoVersion matches the tail of a Go pseudo-version (a commit's time
// and revision), which go build stamps on a checkout without a tag.
var pseudoVersion = regexp.MustCompile(`\d{14}-[0-9a-f]{12}(\+.*)?$`)

// versionOf derives the version from a build's stamp: the module version
// when built as a module at a release (go install ...@v0.3.0, or a checkout
// at a tag), else baseVersion-dev with the VCS revision and ".dirty" for
// uncommitted changes as build metadata: 0.3.0-dev+d6035f8abcde.dirty.
func versionOf(bi *debug.BuildInfo) string {
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	v := bi.Main.Version
	// A pseudo-version says less than the revision beside it, but it is
	// all a go install at a commit has.
	if v != "" && v != "(devel)" && (rev == "" || !pseudoVersion.MatchString(v)) {
		return strings.TrimPrefix(v, "v")
	}
	out := baseVersion + "-dev"
	if rev != "" {
		out += "+" + rev[:min(12, len(rev))]
		if dirty {
			out += ".dirty"
		}
	}
	return out
}
