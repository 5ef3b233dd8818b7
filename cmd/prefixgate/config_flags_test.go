package main

import (
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/internal/config"
)

// TestHelpListsTheTableFlags: serve's and epp's --help list each flag the
// settings table gives the command, with its doc line, and no other.
func TestHelpListsTheTableFlags(t *testing.T) {
	for _, c := range []struct {
		name string
		cmd  config.Cmd
	}{{"serve", config.Serve}, {"epp", config.EPP}} {
		_, out, _ := runMain(t, c.name, "--help")
		want := 0
		for _, e := range config.Table {
			if e.Flag == "" || e.Cmds&c.cmd == 0 {
				continue
			}
			want++
			if !strings.Contains(out, "  -"+e.Flag+" ") && !strings.Contains(out, "  -"+e.Flag+"\n") || !strings.Contains(out, e.Doc) {
				t.Errorf("%s --help lacks --%s or its doc line %q", c.name, e.Flag, e.Doc)
			}
		}
		if got := strings.Count(out, "\n  -"); got != want {
			t.Errorf("%s --help lists %d flags; the table gives it %d", c.name, got, want)
		}
	}
}
