package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	cleanChat    = `{"model":"m","messages":[{"content":"You are a support assistant. See Section 4.2.1; the plan costs $1,299.00.","role":"system"},{"content":"How do refunds work?","role":"user"}]}`
	volatileChat = `{"model":"m","messages":[{"content":"Orders from Monday, November 30, 2026 ship first. You are helpful.","role":"system"},{"content":"Hi","role":"user"}]}`
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func lintCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runLint(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestLintExitCodes(t *testing.T) {
	dir := t.TempDir()
	clean := writeFile(t, dir, "clean.json", cleanChat)
	volatile := writeFile(t, dir, "volatile.jsonl", cleanChat+"\n"+volatileChat+"\n")
	infoOnly := writeFile(t, dir, "info.json", `{"prompt": "Translate into French: good morning"}`)
	invalid := writeFile(t, dir, "invalid.jsonl", cleanChat+"\n{\"messages\":[}\n")
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  int
	}{
		{"clean file", "", []string{clean}, 0},
		{"clean stdin", cleanChat, nil, 0},
		{"clean stdin dash", cleanChat, []string{"-"}, 0},
		{"info below fail-on", "", []string{"--fail-on", "warning", infoOnly}, 0},
		{"info at fail-on info", "", []string{"--fail-on", "info", infoOnly}, 1},
		{"clean at fail-on info", "", []string{"--fail-on", "info", clean}, 0},
		{"warning", "", []string{volatile}, 1},
		{"warning below fail-on error", "", []string{"--fail-on", "error", volatile}, 0},
		{"flags after files", "", []string{volatile, "--fail-on", "error"}, 0},
		{"invalid json is an error finding", "", []string{"--fail-on", "error", invalid}, 1},
		{"jsonl on stdin", cleanChat + "\n" + volatileChat + "\n", nil, 1},
		{"missing file", "", []string{filepath.Join(dir, "nope.json")}, 2},
		{"bad prefix length", "", []string{"--prefix-length", "100", clean}, 2},
		{"bad format", "", []string{"--format", "xml", clean}, 2},
		{"bad fail-on", "", []string{"--fail-on", "fatal", clean}, 2},
		{"bad mode", "", []string{"--mode", "rest", clean}, 2},
		{"bad replicas", "", []string{"--replicas", "0", clean}, 2},
		{"unknown flag", "", []string{"--colour", clean}, 2},
		{"help", "", []string{"--help"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := lintCLI(t, tt.stdin, tt.args...)
			if code != tt.want {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.want, out, errs)
			}
		})
	}
}

func TestLintDirectoryAndJSON(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "b/two.jsonl", cleanChat+"\n\n"+volatileChat+"\n")
	writeFile(t, dir, "a.json", cleanChat)
	writeFile(t, dir, "notes.txt", "not a request")
	code, out, errs := lintCLI(t, "", "--format", "json", dir)
	if code != 1 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	var rep struct {
		Findings []struct {
			RuleID       string `json:"rule_id"`
			Severity     string `json:"severity"`
			RequestIndex int    `json:"request_index"`
			JSONPath     string `json:"json_path"`
			Offset       int    `json:"offset"`
			Hint         string `json:"hint"`
		} `json:"findings"`
		Summary struct {
			Requests              int `json:"requests"`
			Warnings              int `json:"warnings"`
			SuggestedPrefixLength int `json:"suggested_prefix_length"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// a.json, then b/two.jsonl lines 1 and 3: the volatile body is request 2.
	if rep.Summary.Requests != 3 || rep.Summary.SuggestedPrefixLength == 0 {
		t.Errorf("summary %+v", rep.Summary)
	}
	found := false
	for _, f := range rep.Findings {
		if f.RuleID == "volatile-date" {
			found = true
			if f.RequestIndex != 2 || f.JSONPath != "messages[0].content" || f.Offset != len("Orders from ") || f.Severity != "warning" || f.Hint == "" {
				t.Errorf("volatile-date finding %+v", f)
			}
		}
	}
	if !found {
		t.Errorf("no volatile-date finding in %s", out)
	}
}

func TestLintSARIFLocations(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "c.jsonl", cleanChat+"\n"+volatileChat+"\n")
	code, out, errs := lintCLI(t, "", "--format", "sarif", p)
	if code != 1 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	var log struct {
		Version string `json:"version"`
		Runs    []struct {
			Results []struct {
				RuleID    string `json:"ruleId"`
				Level     string `json:"level"`
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string } `json:"artifactLocation"`
						Region           struct{ StartLine, StartColumn int }
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &log); err != nil {
		t.Fatal(err)
	}
	if log.Version != "2.1.0" {
		t.Errorf("version %q", log.Version)
	}
	for _, r := range log.Runs[0].Results {
		if r.RuleID != "volatile-date" {
			continue
		}
		pl := r.Locations[0].PhysicalLocation
		col := strings.Index(volatileChat, "Monday") + 1
		if pl.ArtifactLocation.URI != "file://"+filepath.ToSlash(p) || pl.Region.StartLine != 2 || pl.Region.StartColumn != col || r.Level != "warning" {
			t.Errorf("volatile-date result at %s:%d:%d level %s, want line 2 column %d", pl.ArtifactLocation.URI, pl.Region.StartLine, pl.Region.StartColumn, r.Level, col)
		}
		return
	}
	t.Errorf("no volatile-date result in %s", out)
}

func TestLintTextHasNoColourOffTerminal(t *testing.T) {
	_, out, _ := lintCLI(t, volatileChat)
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour codes in non-terminal output:\n%q", out)
	}
	if !strings.Contains(out, "request 0 (stdin:1)") || !strings.Contains(out, "volatile-date") {
		t.Errorf("text output:\n%s", out)
	}
}
