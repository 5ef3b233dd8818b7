package lint

import (
	"os"
	"testing"
)

// FuzzCheck feeds arbitrary bodies to the engine: it must never panic,
// and every finding must point inside its body.
func FuzzCheck(f *testing.F) {
	for _, name := range []string{"testdata/corpus.jsonl", "testdata/clean.jsonl"} {
		if _, err := os.Stat(name); err != nil {
			continue
		}
		bodies, _ := readJSONL(&testing.T{}, name)
		for _, b := range bodies {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rep, err := Check([][]byte{body, body}, Options{PrefixLength: 1024})
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range rep.Findings {
			if fd.BodyOffset < 0 || fd.BodyOffset > len(body) || fd.Offset < 0 {
				t.Fatalf("finding %+v outside a %d-byte body", fd, len(body))
			}
		}
	})
}
