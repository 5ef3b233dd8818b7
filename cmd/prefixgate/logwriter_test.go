package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestLogWriterKeepsEveryLine: lines written from many goroutines all
// arrive, whole, by Close.
func TestLogWriterKeepsEveryLine(t *testing.T) {
	var out lockedBuffer
	w := newLogWriter(&out)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				fmt.Fprintf(w, "g=%d i=%d %s\n", g, i, strings.Repeat("x", i%100))
			}
		}()
	}
	wg.Wait()
	w.Close()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 16000 {
		t.Fatalf("%d lines, want 16000", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var g, i int
		var pad string
		if n, _ := fmt.Sscanf(l, "g=%d i=%d %s", &g, &i, &pad); n < 2 || len(pad) != i%100 && !(i%100 == 0 && pad == "") {
			t.Fatalf("torn line %q", l)
		}
		seen[l] = true
	}
	if len(seen) != 16000 {
		t.Fatalf("%d distinct lines, want 16000", len(seen))
	}
}
