package main

import (
	"bytes"
	"encoding/json"
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
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	if errb.Len() != 0 {
		t.Errorf("stderr not empty off a terminal: %q", errb.String())
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--scale", "+1"}, 2, "--scale: scale event"},
		{[]string{"--workload", "nope"}, 1, `unknown workload "nope"`},
		{[]string{"--requests", "-5"}, 2, "--requests -5"},
		{[]string{"--policies", "fastest", "--requests", "10"}, 1, `unknown policy "fastest"`},
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
