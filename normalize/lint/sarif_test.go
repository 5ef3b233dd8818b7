package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// validateSARIF checks the properties SARIF 2.1.0 requires of a log and of
// the parts this package writes. The JSON schema cannot be fetched at test
// time, so this is a focused structural check written from the
// specification (sections 3.13 sarifLog, 3.14 run, 3.18 tool, 3.19
// toolComponent, 3.27 result, 3.28 location, 3.30 region, 3.49
// reportingDescriptor), not a full schema validation.
func validateSARIF(data []byte) error {
	var log map[string]any
	if err := json.Unmarshal(data, &log); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if v, _ := log["version"].(string); v != "2.1.0" {
		return fmt.Errorf("version %v, want 2.1.0", log["version"])
	}
	if s, ok := log["$schema"].(string); !ok || s == "" {
		return fmt.Errorf("$schema missing")
	}
	runs, ok := log["runs"].([]any)
	if !ok {
		return fmt.Errorf("runs is not an array")
	}
	for ri, r := range runs {
		run, _ := r.(map[string]any)
		tool, _ := run["tool"].(map[string]any)
		driver, _ := tool["driver"].(map[string]any)
		if name, _ := driver["name"].(string); name == "" {
			return fmt.Errorf("runs[%d].tool.driver.name missing", ri)
		}
		rules, _ := driver["rules"].([]any)
		ids := map[string]int{}
		for i, x := range rules {
			rule, _ := x.(map[string]any)
			id, _ := rule["id"].(string)
			if id == "" {
				return fmt.Errorf("rules[%d].id missing", i)
			}
			if _, dup := ids[id]; dup {
				return fmt.Errorf("rule id %q repeated", id)
			}
			ids[id] = i
			if sd, ok := rule["shortDescription"].(map[string]any); ok {
				if t, _ := sd["text"].(string); t == "" {
					return fmt.Errorf("rule %s: shortDescription.text missing", id)
				}
			}
		}
		results, ok := run["results"].([]any)
		if !ok {
			return fmt.Errorf("runs[%d].results is not an array", ri)
		}
		for i, x := range results {
			res, _ := x.(map[string]any)
			msg, _ := res["message"].(map[string]any)
			if t, _ := msg["text"].(string); t == "" {
				return fmt.Errorf("results[%d].message.text missing", i)
			}
			id, _ := res["ruleId"].(string)
			idx, known := ids[id]
			if !known {
				return fmt.Errorf("results[%d].ruleId %q names no rule", i, id)
			}
			if v, ok := res["ruleIndex"].(float64); ok && int(v) != idx {
				return fmt.Errorf("results[%d].ruleIndex %v, rule %q is at %d", i, v, id, idx)
			}
			switch res["level"] {
			case "none", "note", "warning", "error", nil:
			default:
				return fmt.Errorf("results[%d].level %v is not in the enum", i, res["level"])
			}
			locs, _ := res["locations"].([]any)
			for j, l := range locs {
				loc, _ := l.(map[string]any)
				pl, _ := loc["physicalLocation"].(map[string]any)
				al, _ := pl["artifactLocation"].(map[string]any)
				if u, _ := al["uri"].(string); u == "" {
					return fmt.Errorf("results[%d].locations[%d]: artifactLocation.uri missing", i, j)
				}
				reg, _ := pl["region"].(map[string]any)
				for _, k := range []string{"startLine", "startColumn"} {
					v, ok := reg[k].(float64)
					if !ok || v < 1 || v != float64(int(v)) {
						return fmt.Errorf("results[%d].locations[%d].region.%s = %v, want an integer ≥ 1", i, j, k, reg[k])
					}
				}
			}
		}
	}
	return nil
}

func TestSARIFIsValid(t *testing.T) {
	bodies, locs := readJSONL(t, "testdata/corpus.jsonl")
	rep, err := Check(bodies, corpusOptions)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSARIF(&b, rep, locator(locs)); err != nil {
		t.Fatal(err)
	}
	if err := validateSARIF(b.Bytes()); err != nil {
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

func TestValidatorRejects(t *testing.T) {
	bad := []string{
		`{"version":"2.0.0","$schema":"x","runs":[]}`,
		`{"version":"2.1.0","$schema":"x","runs":[{"tool":{"driver":{}},"results":[]}]}`,
		`{"version":"2.1.0","$schema":"x","runs":[{"tool":{"driver":{"name":"p","rules":[{"id":"a"}]}},"results":[{"ruleId":"b","message":{"text":"m"}}]}]}`,
		`{"version":"2.1.0","$schema":"x","runs":[{"tool":{"driver":{"name":"p","rules":[{"id":"a"}]}},"results":[{"ruleId":"a","level":"fatal","message":{"text":"m"}}]}]}`,
		`{"version":"2.1.0","$schema":"x","runs":[{"tool":{"driver":{"name":"p","rules":[{"id":"a"}]}},"results":[{"ruleId":"a","message":{"text":"m"},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"f"},"region":{"startLine":0,"startColumn":1}}}]}]}]}`,
	}
	for _, s := range bad {
		if validateSARIF([]byte(s)) == nil {
			t.Errorf("accepted %s", s)
		}
	}
}
