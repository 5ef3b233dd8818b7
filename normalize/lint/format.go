package lint

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
)

// Location says where a request's body starts in its file, so that
// renderings can point at a line and column.
type Location struct {
	// URI names the file, relative and with forward slashes ("stdin" for
	// standard input).
	URI string
	// Line and Column (1-based, bytes) are where the body starts.
	Line, Column int
	// Body is the request body as read, to turn a body offset into a line
	// and column.
	Body []byte
}

// position returns the 1-based line and byte column of body offset off.
func (l Location) position(off int) (line, col int) {
	line, col = max(l.Line, 1), max(l.Column, 1)
	off = min(max(off, 0), len(l.Body))
	for _, c := range l.Body[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// Locator returns the location of request i; ok is false when unknown.
type Locator func(i int) (loc Location, ok bool)

// WriteJSON writes the report as {"findings": [...], "summary": {...}}.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}

// ANSI colours for the text rendering.
const (
	colorReset = "\x1b[0m"
	colorBold  = "\x1b[1m"
	colorDim   = "\x1b[2m"
)

var severityColor = map[Severity]string{Error: "\x1b[31m", Warning: "\x1b[33m", Info: "\x1b[36m"}

// WriteText writes the report for people: findings grouped by request,
// corpus-wide findings after them, then the summary. Colour is for
// terminals only.
func WriteText(w io.Writer, rep *Report, locate Locator, color bool) error {
	bw := bufio.NewWriter(w)
	paint := func(code, s string) string {
		if !color || code == "" {
			return s
		}
		return code + s + colorReset
	}
	current := -2
	for _, f := range rep.Findings {
		if f.RequestIndex != current {
			current = f.RequestIndex
			if current >= 0 {
				head := fmt.Sprintf("request %d", current)
				if loc, ok := locate(current); ok {
					line, _ := loc.position(0)
					head += fmt.Sprintf(" (%s:%d)", loc.URI, line)
				}
				fmt.Fprintln(bw, paint(colorBold, head))
			} else {
				fmt.Fprintln(bw, paint(colorBold, "corpus"))
			}
		}
		where := f.JSONPath
		if where == "" {
			where = "(body)"
		}
		if f.RuleID == ruleInvalidJSON || f.RuleID == ruleSchema {
			where = fmt.Sprintf("byte %d", f.Offset)
		} else {
			where = fmt.Sprintf("%s@%d", where, f.Offset)
		}
		fmt.Fprintf(bw, "  %s %s %s: %s\n", paint(severityColor[f.Severity], fmt.Sprintf("%-7s", f.Severity)), f.RuleID, where, f.Message)
		if f.Hint != "" {
			fmt.Fprintf(bw, "    %s\n", paint(colorDim, "hint: "+f.Hint))
		}
	}
	s := rep.Summary
	fmt.Fprintf(bw, "%d requests, %d keys at --prefix-length %d: %d errors, %d warnings, %d infos\n", s.Requests, s.Keys, s.PrefixLength, s.Errors, s.Warnings, s.Infos)
	if s.SuggestedPrefixLength > 0 {
		fmt.Fprintf(bw, "suggested --prefix-length %d: expected hit rate %.1f%%, largest key %.2f× a fair share of %d replicas\n",
			s.SuggestedPrefixLength, 100*s.ExpectedHitRate, s.ExpectedMaxShareRatio, s.Replicas)
	} else if s.Advice != "" {
		fmt.Fprintln(bw, s.Advice)
	}
	return bw.Flush()
}

// SARIF 2.1.0 output: the subset of the format that code-scanning tools
// read. The field names follow the OASIS specification.
type (
	sarifLog struct {
		Schema  string     `json:"$schema"`
		Version string     `json:"version"`
		Runs    []sarifRun `json:"runs"`
	}
	sarifRun struct {
		Tool    sarifTool     `json:"tool"`
		Results []sarifResult `json:"results"`
	}
	sarifTool struct {
		Driver sarifDriver `json:"driver"`
	}
	sarifDriver struct {
		Name           string      `json:"name"`
		Version        string      `json:"version,omitempty"`
		InformationURI string      `json:"informationUri"`
		Rules          []sarifRule `json:"rules"`
	}
	sarifRule struct {
		ID                   string        `json:"id"`
		ShortDescription     sarifMessage  `json:"shortDescription"`
		DefaultConfiguration sarifRuleConf `json:"defaultConfiguration"`
	}
	sarifRuleConf struct {
		Level string `json:"level"`
	}
	sarifMessage struct {
		Text string `json:"text"`
	}
	sarifResult struct {
		RuleID    string          `json:"ruleId"`
		RuleIndex int             `json:"ruleIndex"`
		Level     string          `json:"level"`
		Message   sarifMessage    `json:"message"`
		Locations []sarifLocation `json:"locations,omitempty"`
	}
	sarifLocation struct {
		PhysicalLocation sarifPhysical `json:"physicalLocation"`
	}
	sarifPhysical struct {
		ArtifactLocation sarifArtifact `json:"artifactLocation"`
		Region           sarifRegion   `json:"region"`
	}
	sarifArtifact struct {
		URI string `json:"uri"`
	}
	sarifRegion struct {
		StartLine   int `json:"startLine"`
		StartColumn int `json:"startColumn"`
	}
)

// sarifSchema is the schema URI the SARIF 2.1.0 specification publishes.
const sarifSchema = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

func sarifLevel(s Severity) string {
	switch s {
	case Error:
		return "error"
	case Warning:
		return "warning"
	}
	return "note"
}

// InformationURI is where the SARIF driver points for documentation of
// the tool and its rules.
const InformationURI = "https://github.com/prefixgate/prefixgate/blob/main/docs/lint.md"

// sarifURI turns a location's file name into an artifact URI: an absolute
// path becomes a file:// URI (a relative reference must not start with a
// slash, SARIF §3.10.3), a relative one a percent-encoded relative
// reference; "stdin" stays as it is.
func sarifURI(name string) string {
	if name == "stdin" {
		return name
	}
	if strings.HasPrefix(name, "/") {
		return (&url.URL{Scheme: "file", Path: name}).String()
	}
	if len(name) > 2 && name[1] == ':' && (name[2] == '/' || name[2] == '\\') {
		// A Windows drive path.
		return (&url.URL{Scheme: "file", Path: "/" + filepath.ToSlash(name)}).String()
	}
	return (&url.URL{Path: name}).String()
}

// WriteSARIF writes the report as a SARIF 2.1.0 log with one run whose
// driver is prefixgate at version (empty: none given). A corpus-wide
// finding is located at the first request it names.
func WriteSARIF(w io.Writer, rep *Report, locate Locator, version string) error {
	run := sarifRun{Tool: sarifTool{Driver: sarifDriver{Name: "prefixgate", Version: version, InformationURI: InformationURI}}, Results: []sarifResult{}}
	ruleIndex := map[string]int{}
	for i, r := range Rules {
		ruleIndex[r.ID] = i
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, sarifRule{
			ID: r.ID, ShortDescription: sarifMessage{r.Summary}, DefaultConfiguration: sarifRuleConf{sarifLevel(r.Severity)},
		})
	}
	for _, f := range rep.Findings {
		text := f.Message
		if f.JSONPath != "" {
			text = fmt.Sprintf("%s (at %s@%d)", text, f.JSONPath, f.Offset)
		}
		if f.Hint != "" {
			text += ". Hint: " + f.Hint
		}
		res := sarifResult{RuleID: f.RuleID, RuleIndex: ruleIndex[f.RuleID], Level: sarifLevel(f.Severity), Message: sarifMessage{text}}
		req := f.RequestIndex
		if req < 0 && len(f.Requests) > 0 {
			req = f.Requests[0]
		}
		if loc, ok := locate(req); req >= 0 && ok {
			line, col := loc.position(f.BodyOffset)
			res.Locations = []sarifLocation{{PhysicalLocation: sarifPhysical{
				ArtifactLocation: sarifArtifact{URI: sarifURI(loc.URI)},
				Region:           sarifRegion{StartLine: line, StartColumn: col},
			}}}
		}
		run.Results = append(run.Results, res)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(sarifLog{Schema: sarifSchema, Version: "2.1.0", Runs: []sarifRun{run}})
}
