package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runNormalize(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRunNormalize(t *testing.T) {
	file := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(file, []byte(`{"b": 1.0, "a": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	jsonlFile := filepath.Join(t.TempDir(), "bodies.jsonl")
	if err := os.WriteFile(jsonlFile, []byte("[1]\n[1,]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		stdin    string
		args     []string
		code     int
		out, err string
	}{
		{"stdin", `{ "b":1.0,"a":[1E2] }`, nil, 0, `{"a":[100],"b":1}` + "\n", ""},
		{"dash", `[1]`, []string{"-"}, 0, "[1]\n", ""},
		{"file", "", []string{file}, 0, `{"a":"x","b":1}` + "\n", ""},
		{"key", `{"model":"m","prompt":"p"}`, []string{"--key"}, 0, "", ""},
		{"invalid", `{"a":1,"a":2}`, nil, 1, "", "prefixgate normalize: offset 7: duplicate member name \"a\"\n"},
		{"jsonl", "{\"b\":1,\"a\":2}\n\n[1,]\n\"x\"\n", []string{"--jsonl"}, 1, "{\"a\":2,\"b\":1}\n\"x\"\n", "prefixgate normalize: line 3: offset 3: trailing comma in array\n"},
		{"bad mode", `{}`, []string{"--mode", "grpc"}, 2, "", ""},
		{"bad prefix", `{}`, []string{"--prefix-length", "10"}, 2, "", ""},
		{"bad group", `{}`, []string{"--group", strings.Repeat("g", 65)}, 2, "", ""},
		{"unknown flag", `{}`, []string{"--nope"}, 2, "", ""},
		{"two files", `{}`, []string{"a", "b"}, 2, "", ""},
		{"missing file", `{}`, []string{filepath.Join(t.TempDir(), "none.json")}, 2, "", ""},
		{"flags after the file", "", []string{file, "--key"}, 0, "", ""},
		{"jsonl detected", "{\"b\":1,\"a\":2}\r\n\n[ 1.0 ]\n", nil, 0, "{\"a\":2,\"b\":1}\n[1]\n", ""},
		{"jsonl detected, schema per line", "{\"model\":\"m\",\"prompt\":\"p\"}\n[1]\n", []string{"--mode", "completion"}, 1, "{\"model\":\"m\",\"prompt\":\"p\"}\n", "prefixgate normalize: line 2: offset 0: a completion request must be a JSON object\n"},
		{"jsonl with a bad line", "{\"a\":1}\n{\"a\":\n", nil, 1, "", "prefixgate normalize: offset 8: unexpected data after the top-level value: '{' (for one request per line, use --jsonl)\n"},
		{"two values on one line", `{"a":1} {"b":2}`, nil, 1, "", "prefixgate normalize: offset 8: unexpected data after the top-level value: '{'\n"},
		{"jsonl file", "", []string{jsonlFile}, 1, "[1]\n", "prefixgate normalize: line 2: offset 3: trailing comma in array\n"},
		{"schema", `{"model":"m"}`, []string{"--mode", "chat"}, 1, "", "prefixgate normalize: offset 0: a chat request needs a messages array\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, c.stdin, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, errOut)
			}
			if c.out != "" && out != c.out {
				t.Errorf("stdout %q, want %q", out, c.out)
			}
			if c.err != "" && errOut != c.err {
				t.Errorf("stderr %q, want %q", errOut, c.err)
			}
			if c.name == "key" && (len(out) != 17 || out[16] != '\n') {
				t.Errorf("key output %q, want 16 hex digits and a newline", out)
			}
		})
	}
}

func TestRunNormalizeKeyIgnoresQuestion(t *testing.T) {
	body := func(q string) string {
		return `{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("doc ", 400) + `"},{"role":"user","content":"` + q + `"}]}`
	}
	_, k1, _ := runCLI(t, body("first?"), "--key", "--prefix-length", "1024")
	_, k2, _ := runCLI(t, body("second?"), "--key", "--prefix-length", "1024")
	_, k3, _ := runCLI(t, body("first?"), "--key", "--group", "other")
	if k1 != k2 || k1 == k3 || k1 == "" {
		t.Errorf("keys %q %q %q", k1, k2, k3)
	}
}

func TestRunNormalizeHelp(t *testing.T) {
	code, out, _ := runCLI(t, "", "--help")
	if code != 0 || !strings.Contains(out, "usage: prefixgate normalize") || !strings.Contains(out, "-prefix-length") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
}
