package normalize

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// goldenMode reads the mode from the file name prefix: auto_x.json, chat_x.json.
func goldenMode(t *testing.T, name string) Mode {
	t.Helper()
	prefix, _, _ := strings.Cut(filepath.Base(name), "_")
	m, err := ParseMode(prefix)
	if err != nil {
		t.Fatalf("golden file %s: %v", name, err)
	}
	return m
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s mismatch (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

func describeRoute(ri RouteInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode: %s\nkey: %s\n", ri.Mode, ri.KeyHex())
	for _, k := range ri.SpillKeys {
		fmt.Fprintf(&b, "spill: %s\n", FormatKey(k))
	}
	fmt.Fprintf(&b, "model: %q\ngroup: %q\nrouting-text-length: %d\n", ri.Model, ri.Group, ri.RoutingTextLen)
	return b.String()
}

func TestGoldenValid(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.json")
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := goldenMode(t, f)
			out, ri, err := Normalize(nil, src, Options{Mode: m}, KeyOptions{Mode: m})
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			got := append(append(out, '\n'), describeRoute(ri)...)
			checkGolden(t, strings.TrimSuffix(f, ".json")+".golden", got)

			again, _, err := AppendCanonical(nil, out, Options{Mode: m})
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("not idempotent: %s -> %s (%v)", out, again, err)
			}
			assertSameValue(t, src, out)
		})
	}
}

func TestGoldenInvalid(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.json")
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := goldenMode(t, f)
			_, _, err = Normalize(nil, src, Options{Mode: m}, KeyOptions{Mode: m})
			if err == nil {
				t.Fatalf("accepted invalid input %q", src)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *SyntaxError", err)
			}
			if se.Offset < 0 || se.Offset > int64(len(src)) {
				t.Errorf("offset %d outside the input of %d bytes", se.Offset, len(src))
			}
			got := fmt.Sprintf("code: %s\nerror: %v\n", ErrorCode(err), err)
			checkGolden(t, strings.TrimSuffix(f, ".json")+".golden", []byte(got))
		})
	}
}
