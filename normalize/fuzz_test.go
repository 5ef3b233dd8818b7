package normalize

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func addSeeds(f *testing.F) {
	for _, dir := range []string{"testdata/valid", "testdata/invalid"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, name := range files {
			if b, err := os.ReadFile(name); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{"a":[1,2.5e3,-0,"\u00e9\ud83d\ude00"],"b":{"c":null}}`))
}

// FuzzValidate: never panics; anything accepted is also valid to
// encoding/json; the key reader never panics on arbitrary bytes.
func FuzzValidate(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Validate(data, Options{})
		if err == nil && !json.Valid(data) {
			t.Fatalf("accepted what encoding/json rejects: %q", data)
		}
		if err != nil {
			var se *SyntaxError
			if !asSyntax(err, &se) || se.Offset < 0 || se.Offset > int64(len(data)) || se.Code() == "" {
				t.Fatalf("bad error %v for %q", err, data)
			}
		}
		for _, m := range []Mode{ModeAuto, ModeChat, ModeCompletion, ModeNative, ModeResponses, ModeMessages, ModePooling} {
			_, _ = RouteKey(data, KeyOptions{Mode: m})
		}
	})
}

func asSyntax(err error, se **SyntaxError) bool {
	e, ok := err.(*SyntaxError)
	*se = e
	return ok
}

// FuzzCanonicalize: never panics; the canonical form is stable under a
// second pass, keeps the value, and has a key.
func FuzzCanonicalize(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		out, mode, err := AppendCanonical(nil, data, Options{})
		if err != nil {
			return
		}
		again, mode2, err := AppendCanonical(nil, out, Options{})
		if err != nil || !bytes.Equal(again, out) || mode2 != mode {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", data, out, again, err)
		}
		assertSameValue(t, data, out)
		if _, err := RouteKey(out, KeyOptions{Mode: ModeNative}); err != nil {
			t.Fatalf("no native key for canonical %q: %v", out, err)
		}
		if mode != ModeNative {
			_, _ = RouteKey(out, KeyOptions{})
		}
	})
}
