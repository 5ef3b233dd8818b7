package lint

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// readJSONL reads one body per non-blank line, with its location.
func readJSONL(t *testing.T, name string) ([][]byte, []Location) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var bodies [][]byte
	var locs []Location
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		b := append([]byte(nil), sc.Bytes()...)
		bodies = append(bodies, b)
		locs = append(locs, Location{URI: filepath.ToSlash(name), Line: line, Column: 1, Body: b})
	}
	return bodies, locs
}

func locator(locs []Location) Locator {
	return func(i int) (Location, bool) {
		if i < 0 || i >= len(locs) {
			return Location{}, false
		}
		return locs[i], true
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
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
		t.Errorf("%s differs from the golden file (run go test -update and review the diff):\n%s", name, lineDiff(string(want), string(got)))
	}
}

// lineDiff shows the first differing lines of want and got.
func lineDiff(want, got string) string {
	w, g := bytes.Split([]byte(want), []byte("\n")), bytes.Split([]byte(got), []byte("\n"))
	var out bytes.Buffer
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var a, b []byte
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if !bytes.Equal(a, b) {
			out.WriteString("line " + strconv.Itoa(i+1) + ":\n- " + string(a) + "\n+ " + string(b) + "\n")
			shown++
		}
	}
	return out.String()
}

// The findings corpus is checked with a 1024-character window so that
// "past the window" cases stay short.
var corpusOptions = Options{PrefixLength: 1024, Replicas: 7}

func TestGoldenCorpus(t *testing.T) {
	bodies, locs := readJSONL(t, "testdata/corpus.jsonl")
	rep, err := Check(bodies, corpusOptions)
	if err != nil {
		t.Fatal(err)
	}
	var js, text, sarif bytes.Buffer
	if err := WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	if err := WriteText(&text, rep, locator(locs), false); err != nil {
		t.Fatal(err)
	}
	if err := WriteSARIF(&sarif, rep, locator(locs), ""); err != nil {
		t.Fatal(err)
	}
	golden(t, "corpus.golden.json", js.Bytes())
	golden(t, "corpus.golden.txt", text.Bytes())
	golden(t, "corpus.golden.sarif", sarif.Bytes())
}
