package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runSim([]string{"--workload", "zipf", "--requests", "200", "--policies", "random,prefix-aware", "--json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	// Progress goes to stderr, a line per tenth off a terminal, ending at
	// 100%; stdout holds only the JSON.
	if !strings.Contains(errb.String(), "simulating: 0%") || !strings.Contains(errb.String(), "simulating: 100% (600 of 600 simulated requests)") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := runSim([]string{"--quiet", "--workload", "zipf", "--requests", "100", "--policies", "random"}, nil, &out, &errb); code != 0 || errb.Len() != 0 || !strings.Contains(out.String(), "random") {
		t.Errorf("--quiet: exit %d, stderr %q, stdout %q", code, errb.String(), out.String())
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--scale", "+1"}, 2, "--scale: scale event"},
		{[]string{"--workload", "bogus"}, 2, `unknown workload "bogus"`},
		{[]string{"--requests", "-5"}, 2, "--requests -5"},
		{[]string{"--policies", "fastest", "--requests", "10"}, 2, `unknown policy "fastest"`},
		{[]string{"--rate", "0"}, 2, "--rate 0 must be a positive number"},
		{[]string{"--rates", "1,x"}, 2, `--rates: "x" is not a positive rate multiplier`},
		{[]string{"--slo", "-1s"}, 2, "--slo -1s must be positive"},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
	} {
		out.Reset()
		errb.Reset()
		if code := runSim(tc.args, nil, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("sim %v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}

func TestSimSweepCommand(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	args := []string{"--quiet", "--workload", "zipf", "--requests", "150", "--policies", "random,sglang-cache-aware,oracle", "--rates", "1,3", "--json", "--plot", dir}
	if code := runSim(args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var m struct {
		DefaultPolicy   string              `json:"default_policy"`
		Sweep           []json.RawMessage   `json:"sweep"`
		SustainableRate map[string]*float64 `json:"sustainable_rate"`
	}
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m.DefaultPolicy == "" || len(m.Sweep) != 2 || len(m.SustainableRate) != 3 {
		t.Errorf("default_policy %q, %d sweep points, sustainable %v", m.DefaultPolicy, len(m.Sweep), m.SustainableRate)
	}
	want := filepath.Join(dir, "sweep-ttft-p90.svg")
	if !strings.Contains(errb.String(), "prefixgate sim: wrote ") || !strings.Contains(errb.String(), want) {
		t.Errorf("stderr does not say where the charts went: %q", errb.String())
	}
	if b, err := os.ReadFile(want); err != nil || !bytes.Contains(b, []byte("stroke-dasharray")) {
		t.Errorf("%s: %v; dashed lines missing", want, err)
	}
}

func TestBenchCommandFlags(t *testing.T) {
	var out, errb bytes.Buffer
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "1", "--requests", "1"}, "--url is required"},
		{[]string{"--url", "http://127.0.0.1:1", "--requests", "1"}, "exactly one of --rate"},
	} {
		errb.Reset()
		if code := runBench(tc.args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("bench %v: exit %d, stderr %q", tc.args, code, errb.String())
		}
	}
}
