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

// TestGeneratedVectors checks the differential fuzz's generator: the same
// seed gives the same vectors, and the documents reach accepting and
// rejecting paths of every kind the SDKs must agree on.
func TestGeneratedVectors(t *testing.T) {
	a, err := Generated(7, 400)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generated(7, 400)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatal("the same seed gave different vectors")
	}
	c, err := Generated(8, 400)
	if err != nil {
		t.Fatal(err)
	}
	if jc, _ := json.Marshal(c); bytes.Equal(ja, jc) {
		t.Fatal("different seeds gave the same vectors")
	}
	seen := map[string]int{}
	for _, v := range a {
		switch {
		case v.Error != nil:
			seen["error"]++
		case v.KeyError != nil:
			seen["key_error"]++
		default:
			seen[v.KeyMode]++
			if len(v.SpillKeys) > 0 {
				seen["spill"]++
			}
		}
		if v.InputBase64 != "" {
			seen["not utf-8"]++
		}
	}
	for _, k := range []string{"error", "key_error", "chat", "completion", "native", "spill", "not utf-8"} {
		if seen[k] == 0 {
			t.Errorf("no generated vector of kind %q: %v", k, seen)
		}
	}
	if seen["error"] > len(a)/2 {
		t.Errorf("%d of %d generated documents are rejected: too few reach the encoders", seen["error"], len(a))
	}
}
