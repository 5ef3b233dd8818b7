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

// FuzzHashBlockMatchesXXH3 holds hashBlock to the library on any 64 bytes
// and seed the fuzzer finds (go test -fuzz FuzzHashBlockMatchesXXH3);
// shorter inputs are padded with their own bytes, longer ones cut.
func FuzzHashBlockMatchesXXH3(f *testing.F) {
	f.Add([]byte("x"), uint64(0))
	f.Add(make([]byte, BlockSize), uint64(1<<64-1))
	f.Add([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), uint64(xxhSecret3))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		b := make([]byte, BlockSize)
		for i := range b {
			if len(in) > 0 {
				b[i] = in[i%len(in)]
			}
		}
		if got, want := hashBlock(b, seed), xxh3.HashSeed(b, seed); got != want {
			t.Fatalf("block %x, seed %#x: %#x, want %#x", b, seed, got, want)
		}
	})
}
