package normalize

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// The word-at-a-time character counters against a rune-by-rune count, on
// texts that mix ASCII runs (the four-word fast path) with multi-byte
// characters at every alignment.
func TestCharCountersMatchRuneCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "plain ascii run of text ", "é", "€", "東京", "😀", "\x1e", "\x1f"}
	for trial := range 400 {
		var b []byte
		for len(b) < trial {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		if got, want := len(b)-continuationBytes(b), utf8.RuneCount(b); got != want {
			t.Fatalf("trial %d: continuationBytes says %d characters, want %d (%q)", trial, got, want, b)
		}
		// cut at growing counts, as finish does, against the offset of
		// the n-th rune.
		var cur charCursor
		for n := 1 + rng.IntN(8); ; n *= 2 {
			end, longer := cur.cut(b, n)
			want, count := len(b), 0
			for i := range string(b) {
				if count == n {
					want = i
					break
				}
				count++
			}
			if end != want || longer != (want < len(b)) || cur.count != min(n, utf8.RuneCount(b)) {
				t.Fatalf("trial %d: cut(%d) = %d, %v, count %d; want %d, %v, %d (%q)",
					trial, n, end, longer, cur.count, want, want < len(b), min(n, utf8.RuneCount(b)), b)
			}
			if !longer {
				break
			}
		}
	}
}
