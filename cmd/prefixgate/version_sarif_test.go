package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSARIFVersionPassesMultitool runs the command's own SARIF, with the
// version this build reports, through Microsoft's SARIF Multitool, which
// flags a driver version that is not a version (rule SARIF2005). Without
// the tool (make tools installs it) the test skips, unless
// PREFIXGATE_REQUIRE_TOOLS is set, as make test sets it.
func TestSARIFVersionPassesMultitool(t *testing.T) {
	tool, err := filepath.Abs(filepath.Join("..", "..", "tools", "sarif", "node_modules", ".bin", "sarif-multitool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tool); err != nil {
		if os.Getenv("PREFIXGATE_REQUIRE_TOOLS") != "" {
			t.Fatalf("SARIF Multitool missing (%v); run make tools", err)
		}
		t.Skipf("SARIF Multitool not installed (%v); run make tools", err)
	}
	_, sarif, errs := lintCLI(t, volatileChat, "--format", "sarif")
	if sarif == "" {
		t.Fatalf("no SARIF output; stderr %s", errs)
	}
	for _, p := range multitoolResults(t, tool, []byte(sarif)) {
		if strings.Contains(p, "SARIF2005") || strings.HasPrefix(p, "error ") {
			t.Errorf("sarif-multitool: %s", p)
		}
	}
}

// multitoolResults validates a SARIF log and returns the validator's
// results as "level rule message" lines; the tool writes them as SARIF of
// its own and exits 0 whatever it finds.
func multitoolResults(t *testing.T, tool string, log []byte) []string {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "lint.sarif"), filepath.Join(dir, "validation.sarif")
	if err := os.WriteFile(in, log, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "validate", in, "--output", out, "--quiet")
	// A .NET program: without ICU it starts only with invariant
	// globalization, which changes nothing in validating ASCII JSON.
	cmd.Env = append(os.Environ(), "DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sarif-multitool validate: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Runs []struct {
			Results []struct {
				RuleID  string `json:"ruleId"`
				Level   string `json:"level"`
				Message struct {
					Text      string   `json:"text"`
					Arguments []string `json:"arguments"`
				} `json:"message"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &res); err != nil || len(res.Runs) != 1 {
		t.Fatalf("validator output (%d runs): %v", len(res.Runs), err)
	}
	var lines []string
	for _, r := range res.Runs[0].Results {
		lines = append(lines, fmt.Sprintf("%s %s %s %v", r.Level, r.RuleID, r.Message.Text, r.Message.Arguments))
	}
	return lines
}
