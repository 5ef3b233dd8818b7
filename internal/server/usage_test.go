package server

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestSSETailKeepsTheEnd feeds streams in reads of every size, across the
// ring's wrap, and checks the tail against the stream's real end.
func TestSSETailKeepsTheEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, sseTailBytes - 1, sseTailBytes, sseTailBytes + 1, 3*sseTailBytes + 17, 100_000} {
		stream := make([]byte, size)
		for i := range stream {
			stream[i] = byte('a' + rng.IntN(26))
		}
		tail := newSSETail()
		for rest := stream; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(2*sseTailBytes))
			tail.add(rest[:n])
			rest = rest[n:]
		}
		got, whole := tail.bytes()
		want := stream[max(0, size-sseTailBytes):]
		if !bytes.Equal(got, want) || whole != (size <= sseTailBytes) {
			t.Fatalf("size %d: tail of %d bytes (whole %v) differs from the stream's last %d", size, len(got), whole, len(want))
		}
	}
}
