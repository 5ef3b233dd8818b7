package main

import (
	"runtime/debug"
)

// version is this binary's version: the module version it was built at
// (go install ...@v1.2.3), or "devel" with the VCS revision when built
// from a checkout, with "+dirty" for uncommitted changes.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v += "+" + rev[:min(12, len(rev))] + dirty
	}
	return v
}
