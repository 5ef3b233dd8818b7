package normalize

import (
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

// TestHashBlockMatchesXXH3: on random blocks and seeds, and on blocks of
// one repeated byte with the seeds at the ends of the range, hashBlock is
// the library's XXH3-64 with that seed.
func TestHashBlockMatchesXXH3(t *testing.T) {
	rng := rand.New(rand.NewPCG(64, 64))
	b := make([]byte, BlockSize)
	seeds := []uint64{0, 1, 1<<64 - 1, 1 << 63, xxhSecret0, ^uint64(xxhSecret1)}
	for c := range 256 {
		for i := range b {
			b[i] = byte(c)
		}
		for _, seed := range seeds {
			if got, want := hashBlock(b, seed), xxh3.HashSeed(b, seed); got != want {
				t.Fatalf("block of 0x%02x, seed %#x: %#x, want %#x", c, seed, got, want)
			}
		}
	}
	for range 100000 {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		seed := rng.Uint64()
		if got, want := hashBlock(b, seed), xxh3.HashSeed(b, seed); got != want {
			t.Fatalf("block %x, seed %#x: %#x, want %#x", b, seed, got, want)
		}
	}
}
