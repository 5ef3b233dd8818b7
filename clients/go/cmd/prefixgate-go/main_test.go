package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCLI(t *testing.T) {
	for _, c := range []struct {
		args           []string
		in             string
		code           int
		stdout, stderr string
	}{
		{[]string{"canonicalize"}, `{ "b":1.0, "a":"\u00e9" }`, 0, "{\"a\":\"é\",\"b\":1}\n", ""},
		{[]string{"canonicalize", "--mode", "chat"}, `{"user":"u","messages":[],"model":"m"}`, 0, "{\"model\":\"m\",\"messages\":[],\"user\":\"u\"}\n", ""},
		{[]string{"key"}, `{"model":"m","prompt":"hello"}`, 0, "", ""},
		{[]string{"key", "--group", "g", "--prefix-length", "2048"}, `{"model":"m","prompt":"hello"}`, 0, "", ""},
		{[]string{"build"}, `{"model":"m","question":"q"}`, 0, "{\"model\":\"m\",\"messages\":[{\"content\":\"q\",\"role\":\"user\"}]}\n", ""},
		{[]string{"canonicalize"}, `{"a":1,"a":2}`, 1, "", "offset 7: duplicate member name \"a\"\n"},
		{[]string{"key", "--mode", "chat"}, `{}`, 1, "", "offset 0: a chat request needs a messages array\n"},
		{[]string{"build"}, `{"model":"m"}`, 1, "", "prompt spec: question: is required\n"},
		{[]string{"build", "--mode", "responses"}, `{"model":"m","instructions":"s","question":"q"}`, 0, "{\"model\":\"m\",\"instructions\":\"s\",\"input\":[{\"content\":\"q\",\"role\":\"user\"}]}\n", ""},
		{[]string{"build", "--mode=messages"}, `{"model":"m","instructions":"s","question":"q"}`, 0, "{\"model\":\"m\",\"system\":\"s\",\"messages\":[{\"content\":\"q\",\"role\":\"user\"}]}\n", ""},
		{[]string{"build", "--mode", "pooling"}, `{"model":"m","question":"q"}`, 2, "", "prefixgate-go build: --mode pooling: a prompt spec builds chat, responses or messages requests\n"},
		{[]string{"key", "--prefix-length", "5"}, `{}`, 2, "", ""},
		{[]string{"canonicalize", "--mode", "x"}, `{}`, 2, "", ""},
		{[]string{"frobnicate"}, ``, 2, "", ""},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, strings.NewReader(c.in), &out, &errb)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, c.code, errb.String())
			continue
		}
		if c.stdout != "" && out.String() != c.stdout {
			t.Errorf("%v: stdout %q, want %q", c.args, out.String(), c.stdout)
		}
		if c.stderr != "" && errb.String() != c.stderr {
			t.Errorf("%v: stderr %q, want %q", c.args, errb.String(), c.stderr)
		}
		if c.args[0] == "key" && code == 0 && len(strings.TrimSpace(out.String())) != 16 {
			t.Errorf("%v: key %q", c.args, out.String())
		}
	}
}
