package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSimPDCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runSim([]string{"--pd", "1:2", "--workload", "agent", "--requests", "60", "--policies", "prefix-index,smg-pd,aggregated", "--json", "--quiet"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep struct {
		PD       string `json:"pd"`
		Replicas int    `json:"replicas"`
		Policies []struct {
			Name        string   `json:"name"`
			SplitShare  *float64 `json:"split_share"`
			ITLP90      *float64 `json:"itl_p90_ms"`
			Transferred *int64   `json:"transferred_tokens"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	if rep.PD != "1:2" || rep.Replicas != 3 || len(rep.Policies) != 3 {
		t.Fatalf("pd %q, %d replicas, %d policies", rep.PD, rep.Replicas, len(rep.Policies))
	}
	for _, p := range rep.Policies {
		if p.SplitShare == nil || p.ITLP90 == nil || p.Transferred == nil {
			t.Errorf("%s lacks a disaggregation field", p.Name)
		}
	}
	if s := *rep.Policies[1].SplitShare; s != 1 {
		t.Errorf("smg-pd split share %v, want 1", s)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pd", "2"}, `--pd: "2" is not P:D`},
		{[]string{"--pd", "1:1", "--rates", "1,2"}, "--pd: runs one router"},
		{[]string{"--pd", "1:1", "--replicas", "4"}, "--pd: runs one router"},
		{[]string{"--pd", "1:1", "--policies", "random"}, `unknown policy "random"`},
		{[]string{"--split-interference", "1"}, "need --pd"},
	} {
		out.Reset()
		errb.Reset()
		if code := runSim(tc.args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("sim %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
