package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestLoadErrorsNameKeyAndLine: errors name the YAML key (dotted) and its
// line, never a Go type.
func TestLoadErrorsNameKeyAndLine(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"listen: :8080\nrouting:\n  polcy: random\n", ":3: routing.polcy: unknown key (did you mean routing.policy?)"},
		{"routing:\n  threshold: lots\n", `:2: routing.threshold: "lots" is not an integer`},
		{"limits:\n  request_timeout: soon\n", `:2: limits.request_timeout: "soon" is not a duration`},
		{"backends: [a]\nfoo: 1\n", ":2: foo: unknown key; the keys at the top level are admin, backends,"},
		{"routing: [1, 2]\n", ":1: routing: a list where a mapping is wanted"},
		{"routing:\n  policy: [\n", "c.yaml: line 2: did not find expected node content"},
	} {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
			continue
		}
		for _, goName := range []string{"config.", "not found in type", "!!"} {
			if strings.Contains(err.Error(), goName) {
				t.Errorf("%q: error %q shows a Go name (%s)", tc.yaml, err, goName)
			}
		}
	}
}

// TestDecodeErrorKeepsUnmarshalerContext: an unmarshaler's error that wraps
// the decoder's keeps its own key and loses the Go type.
func TestDecodeErrorKeepsUnmarshalerContext(t *testing.T) {
	inner := &yaml.TypeError{Errors: []string{"line 3: field engin not found in type struct { URL string \"yaml:\\\"url\\\"\" }"}}
	err := decodeError("c.yaml", fmt.Errorf("line 2: backends[0]: %w", inner), yamlKeys{atLine: map[int]string{2: "backends"}})
	if got, want := err.Error(), `c.yaml:2: backends[0]: unknown key "engin"`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
