package lint

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// manyVolatileValues returns a text of about size bytes packed with values
// that several rules match, overlapping each other: Unix times, hex ids,
// UUIDs and ISO date-times.
func manyVolatileValues(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "%d ", 1700000000+i)
		case 1:
			fmt.Fprintf(&b, "%016x ", uint64(i)*0x9e3779b97f4a7c15)
		case 2:
			fmt.Fprintf(&b, "%08x-1234-5678-9abc-%012x ", i, i)
		default:
			fmt.Fprintf(&b, "2026-05-%02dT10:%02d:00Z%d ", 1+i%28, i%60, 1700000000+i)
		}
	}
	return b.String()
}

// TestFindVolatileKeepsFirstRankedMatch checks the overlap resolution on a
// text with thousands of overlapping matches against the definition: scan
// matches in rank order and keep each that overlaps none kept before.
func TestFindVolatileKeepsFirstRankedMatch(t *testing.T) {
	s := manyVolatileValues(64 << 10)
	got := findVolatile(s)
	if len(got) < 2000 {
		t.Fatalf("only %d matches: the text does not exercise the overlap check", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].start < got[i-1].end {
			t.Fatalf("matches %d and %d overlap: %+v %+v", i-1, i, got[i-1], got[i])
		}
	}
}

// TestKeepFirstRankedMatchesDefinition compares the overlap resolution with
// its definition, written the slow way: take matches in rank order (stable)
// and keep each that overlaps none kept before.
func TestKeepFirstRankedMatchesDefinition(t *testing.T) {
	rules := []string{ruleTimestamp, ruleUUID, ruleDate, ruleID}
	rank := map[string]int{ruleTimestamp: 0, ruleUUID: 1, ruleDate: 2, ruleID: 3}
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(300)
		var all []match
		for range rng.IntN(60) {
			i := rng.IntN(n)
			all = append(all, match{rule: rules[rng.IntN(len(rules))], start: i, end: i + 1 + rng.IntN(min(n-i, 20))})
		}
		want := slices.Clone(all)
		slices.SortStableFunc(want, func(a, b match) int { return rank[a.rule] - rank[b.rule] })
		var kept []match
		for _, m := range want {
			if !slices.ContainsFunc(kept, func(k match) bool { return m.start < k.end && k.start < m.end }) {
				kept = append(kept, m)
			}
		}
		slices.SortFunc(kept, func(a, b match) int { return a.start - b.start })
		got := keepFirstRanked(slices.Clone(all), n)
		if !slices.Equal(got, kept) {
			t.Fatalf("trial %d: matches %+v\n got %+v\nwant %+v", trial, all, got, kept)
		}
	}
}

// BenchmarkFindVolatile scans texts packed with overlapping volatile values;
// the time per byte must not grow with the number of matches.
func BenchmarkFindVolatile(b *testing.B) {
	for _, size := range []int{8 << 10, 64 << 10} {
		s := manyVolatileValues(size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				findVolatile(s)
			}
		})
	}
}
