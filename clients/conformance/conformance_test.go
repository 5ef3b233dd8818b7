package conformance

import (
	"bytes"
	"os"
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
