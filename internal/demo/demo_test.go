package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestPrefixAwareBeatsRandom runs a small demo end to end — real replicas,
// real router, real HTTP — and checks that routing on the canonical prefix
// finds the warm caches that random routing misses.
func TestPrefixAwareBeatsRandom(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated fleet")
	}
	opts := Options{Replicas: 3, Documents: 12, Words: 600, Requests: 120, Concurrency: 6, Speed: 20, CacheBlocks: 450,
		Policies: []string{"random", "prefix-aware", "prefix-index"}}
	results, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	byPolicy := map[string]Result{}
	for _, r := range results {
		if r.Failed != 0 || r.OK != opts.Requests {
			t.Errorf("%s: %d ok, %d failed; want all %d ok", r.Policy, r.OK, r.Failed, opts.Requests)
		}
		if len(r.Share) == 0 {
			t.Errorf("%s: no backend reported in X-Prefixgate-Backend", r.Policy)
		}
		byPolicy[r.Policy] = r
	}
	random, aware := byPolicy["random"], byPolicy["prefix-aware"]
	if aware.HitRate <= random.HitRate+0.2 {
		t.Errorf("prefix-aware hit rate %.2f, random %.2f: want prefix-aware at least 20 points ahead", aware.HitRate, random.HitRate)
	}
	if index := byPolicy["prefix-index"]; index.HitRate <= random.HitRate+0.2 {
		t.Errorf("prefix-index hit rate %.2f, random %.2f: want prefix-index at least 20 points ahead", index.HitRate, random.HitRate)
	}
	var out bytes.Buffer
	PrintTable(&out, opts, results)
	for _, want := range []string{"random", "prefix-aware", "hit rate", "prefix-index (default) vs random"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
}
