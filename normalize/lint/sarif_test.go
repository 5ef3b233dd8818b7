package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sarifMultitool returns the path of Microsoft's SARIF Multitool, which
// `make tools` installs (pinned) under tools/sarif. Without it the test
// skips, unless PREFIXGATE_REQUIRE_TOOLS is set, as `make test` sets it, so
// that CI cannot pass without the validation.
func sarifMultitool(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "tools", "sarif", "node_modules", ".bin", "sarif-multitool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("PREFIXGATE_REQUIRE_TOOLS") != "" {
			t.Fatalf("SARIF Multitool missing (%v); run make tools", err)
		}
		t.Skipf("SARIF Multitool not installed (%v); run make tools", err)
	}
	return p
}

// multitoolProblems runs `sarif-multitool validate` on a log and returns
// its error and warning results (SARIF1xxx schema and specification rules,
// SARIF2xxx guidance such as SARIF2005 tool properties) as lines. The
// validator writes its own findings as a SARIF log, which is read back:
// its exit status is 0 whatever it finds.
func multitoolProblems(t *testing.T, tool string, log []byte) []string {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "lint.sarif"), filepath.Join(dir, "validation.sarif")
	if err := os.WriteFile(in, log, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "validate", in, "--output", out, "--quiet")
	// The tool is a .NET program; without ICU (a minimal machine) it
	// refuses to start unless told to use invariant globalization, which
	// changes nothing in validating ASCII JSON.
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
			Invocations []struct {
				ExecutionSuccessful bool `json:"executionSuccessful"`
			} `json:"invocations"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("validator output: %v", err)
	}
	if len(res.Runs) != 1 {
		t.Fatalf("validator output has %d runs", len(res.Runs))
	}
	var problems []string
	for _, r := range res.Runs[0].Results {
		// A result without a level is a warning (SARIF §3.27.10).
		if r.Level == "" || r.Level == "warning" || r.Level == "error" {
			problems = append(problems, fmt.Sprintf("%s %s %s %v", r.Level, r.RuleID, r.Message.Text, r.Message.Arguments))
		}
	}
	return problems
}

// TestSARIFValidates checks the SARIF output with Microsoft's SARIF
// Multitool: the findings corpus under a relative path, the same corpus
// under an absolute path and a path with a space, and standard input.
func TestSARIFValidates(t *testing.T) {
	tool := sarifMultitool(t)
	bodies, locs := readJSONL(t, "testdata/corpus.jsonl")
	rep, err := Check(bodies, corpusOptions)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"testdata/corpus.jsonl", abs, "test data/corpus #1.jsonl", "stdin"} {
		t.Run(name, func(t *testing.T) {
			named := make([]Location, len(locs))
			for i, l := range locs {
				l.URI = filepath.ToSlash(name)
				named[i] = l
			}
			var b bytes.Buffer
			if err := WriteSARIF(&b, rep, locator(named), "1.2.3"); err != nil {
				t.Fatal(err)
			}
			if p := multitoolProblems(t, tool, b.Bytes()); len(p) > 0 {
				t.Errorf("sarif-multitool validate:\n%s", strings.Join(p, "\n"))
			}
			if strings.HasPrefix(name, "/") && !strings.Contains(b.String(), `"uri": "file://`+abs) {
				t.Errorf("absolute path %s not written as a file:// URI", abs)
			}
		})
	}
}

// TestMultitoolCatchesProblems makes sure the validation can fail: the log
// of the previous release (an absolute path as a relative reference, no
// driver version or informationUri) must be rejected.
func TestMultitoolCatchesProblems(t *testing.T) {
	tool := sarifMultitool(t)
	bad := `{"$schema":"` + sarifSchema + `","version":"2.1.0","runs":[{"tool":{"driver":{"name":"prefixgate","rules":[{"id":"a","shortDescription":{"text":"A rule."}}]}},` +
		`"results":[{"ruleId":"a","ruleIndex":0,"level":"warning","message":{"text":"m."},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"/tmp/x.jsonl"},"region":{"startLine":1,"startColumn":1}}}]}]}]}`
	got := strings.Join(multitoolProblems(t, tool, []byte(bad)), "\n")
	for _, want := range []string{"SARIF1004", "SARIF2005"} {
		if !strings.Contains(got, want) {
			t.Errorf("validator did not report %s; got:\n%s", want, got)
		}
	}
}

// TestSARIFRegionsPointAtTheText checks what the validator cannot: that a
// region's line and column point at the reported text.
func TestSARIFRegionsPointAtTheText(t *testing.T) {
	bodies, locs := readJSONL(t, "testdata/corpus.jsonl")
	rep, err := Check(bodies, corpusOptions)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSARIF(&b, rep, locator(locs), ""); err != nil {
		t.Fatal(err)
	}
	// Columns point at the text: the UUID finding of request 2.
	var log struct {
		Runs []struct {
			Results []struct {
				RuleID    string `json:"ruleId"`
				Locations []struct {
					PhysicalLocation struct {
						Region struct{ StartLine, StartColumn int } `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range log.Runs[0].Results {
		if r.RuleID == ruleUUID {
			reg := r.Locations[0].PhysicalLocation.Region
			line := bodies[reg.StartLine-1]
			if got := string(line[reg.StartColumn-1 : reg.StartColumn+7]); got != "550e8400" {
				t.Errorf("uuid region %d:%d points at %q", reg.StartLine, reg.StartColumn, got)
			}
			found = true
		}
	}
	if !found {
		t.Error("no uuid result")
	}
}

func TestSARIFURI(t *testing.T) {
	for in, want := range map[string]string{
		"stdin":                 "stdin",
		"traces/a.jsonl":        "traces/a.jsonl",
		"test data/a #1.jsonl":  "test%20data/a%20%231.jsonl",
		"/srv/traces/a.jsonl":   "file:///srv/traces/a.jsonl",
		"/srv/my traces/a.json": "file:///srv/my%20traces/a.json",
		"C:/traces/a.json":      "file:///C:/traces/a.json",
	} {
		if got := sarifURI(in); got != want {
			t.Errorf("sarifURI(%q) = %q, want %q", in, got, want)
		}
	}
}
