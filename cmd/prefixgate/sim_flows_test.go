package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSimFlowControlJSON(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--quiet", "--workload", "noisy-neighbor", "--requests", "600", "--variants", "prefixgate,fcfs", "--json"}
	if code := runSim(args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep struct {
		Policies    []map[string]any `json:"policies"`
		FlowControl []struct {
			Name  string           `json:"name"`
			Role  string           `json:"role"`
			Out   *float64         `json:"output_tokens_per_s"`
			Hit   *float64         `json:"hit_rate"`
			Flows []map[string]any `json:"flows"`
		} `json:"flow_control"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	if len(rep.FlowControl) != 2 || rep.FlowControl[0].Name != "prefixgate" || rep.FlowControl[0].Role != "route" || rep.FlowControl[1].Role != "peer" {
		t.Fatalf("flow_control = %+v", rep.FlowControl)
	}
	if len(rep.Policies) != 1 || rep.Policies[0]["name"] != "prefix-index" {
		t.Errorf("a workload with flows runs the default policy alone unless --policies says otherwise: %v", rep.Policies)
	}
	fields := []string{"fairness_id", "priority", "requests", "shed", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "served_tokens", "demand_tokens"}
	for _, v := range rep.FlowControl {
		if v.Out == nil || v.Hit == nil || len(v.Flows) != 8 {
			t.Fatalf("%s: output %v, hit %v, %d flows", v.Name, v.Out, v.Hit, len(v.Flows))
		}
		for _, f := range v.Flows {
			if len(f) != len(fields) {
				t.Errorf("%s: flow has keys %v, want %v", v.Name, f, fields)
			}
			for _, k := range fields {
				if _, ok := f[k]; !ok {
					t.Errorf("%s: flow lacks %q", v.Name, k)
				}
			}
		}
	}
	out.Reset()
	if code := runSim([]string{"--quiet", "--workload", "noisy-neighbor", "--requests", "300", "--variants", "fcfs", "--flows", "chat"}, nil, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "flow control") || !strings.Contains(out.String(), "chat") || strings.Contains(out.String(), "light-1") {
		t.Errorf("table with --flows chat: exit %d\n%s", code, out.String())
	}
}

func TestSimFlowFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--engine-scheduling", "lifo"}, 2, `--engine-scheduling "lifo" is not fcfs or priority`},
		{[]string{"--variants", "nginx"}, 2, `--variants: unknown flow-control variant "nginx"`},
		{[]string{"--flows", " , "}, 2, "--flows"},
		{[]string{"--workload", "noisy-neighbor", "--requests", "100", "--flows", "nobody"}, 1, `no flow "nobody"`},
		{[]string{"--workload", "zipf", "--requests", "100", "--flows", "chat"}, 1, "has no flows"},
	} {
		var out, errb bytes.Buffer
		if code := runSim(append([]string{"--quiet"}, tc.args...), nil, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
