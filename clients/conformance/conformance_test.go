package conformance

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestVectorsFresh fails when vectors.json differs from what the reference
// implementation produces now: run `go run ./clients/conformance/gen`.
func TestVectorsFresh(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("vectors.json is stale; run `go run ./clients/conformance/gen` from the repository root")
	}
}

// TestNativeSameKeyGroups checks the contract the native_same_key_* vectors
// carry: bodies that differ only in sampling parameters and volatile
// metadata share a key in native mode.
func TestNativeSameKeyGroups(t *testing.T) {
	var f File
	data, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	groups := map[string][]Vector{}
	for _, v := range f.Vectors {
		if rest, ok := strings.CutPrefix(v.Name, "native_same_key_"); ok {
			g := rest[:strings.LastIndexByte(rest, '_')]
			groups[g] = append(groups[g], v)
		}
	}
	if len(groups) != 4 {
		t.Fatalf("%d native_same_key groups, want 4", len(groups))
	}
	seen := map[string]string{}
	for g, vs := range groups {
		if len(vs) < 2 {
			t.Fatalf("group %s has %d vectors", g, len(vs))
		}
		for _, v := range vs {
			if v.Key == "" || v.KeyMode != "native" {
				t.Fatalf("%s: key %q in mode %q", v.Name, v.Key, v.KeyMode)
			}
			if v.Key != vs[0].Key {
				t.Errorf("%s has key %s, %s has %s", v.Name, v.Key, vs[0].Name, vs[0].Key)
			}
		}
		if other, dup := seen[vs[0].Key]; dup {
			t.Errorf("groups %s and %s share a key", g, other)
		}
		seen[vs[0].Key] = g
	}
}
