package normalize

import (
	"math/rand/v2"
	"testing"
)

// firstNeedingLook is plainChunks' contract byte by byte.
func firstNeedingLook(s []byte) int {
	for i, c := range s {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return i
		}
	}
	return len(s)
}

// TestPlainChunksMatchesBytewise puts every byte value at every position of
// plain runs of every length from 16 to 80 (whole chunks, pairs of chunks
// and every tail the overlapping last chunk reads), then a second odd byte
// up to a chunk after the first, where a flag in the overlap or in the
// other chunk of a pair could be taken for the first.
func TestPlainChunksMatchesBytewise(t *testing.T) {
	plain := []byte("abcdefghijklmnopqrstuvwxyz0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&'()*+,-./:;<=>?@[]^_`{|}~")
	odd := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7e, 0x7f, 0x80, 0xa2, 0xc3, 0xdc, 0xff}
	check := func(s []byte) {
		if got, want := plainChunks(s), firstNeedingLook(s); got != want {
			t.Fatalf("plainChunks(%q) = %d, want %d", s, got, want)
		}
	}
	for n := 16; n <= 80; n++ {
		s := make([]byte, n)
		copy(s, plain[:n])
		check(s)
		for pos := range n {
			for c := range 256 {
				s[pos] = byte(c)
				check(s)
			}
			for _, a := range odd {
				s[pos] = a
				for pos2 := pos + 1; pos2 < min(n, pos+17); pos2++ {
					for _, b := range odd {
						s[pos2] = b
						check(s)
					}
					s[pos2] = plain[pos2]
				}
			}
			s[pos] = plain[pos]
		}
	}
}

// TestPlainChunksRandom compares it on random runs cut from random offsets
// of a buffer, so that the reads start at every alignment.
func TestPlainChunksRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 32))
	buf := make([]byte, 4096)
	for range 3000 {
		for i := range buf {
			buf[i] = byte(0x20 + rng.IntN(0x5f))
			if buf[i] == '"' || buf[i] == '\\' {
				buf[i] = 'x'
			}
		}
		for range rng.IntN(3) {
			buf[rng.IntN(len(buf))] = byte(rng.IntN(256))
		}
		off := rng.IntN(64)
		n := 16 + rng.IntN(len(buf)-off-16)
		s := buf[off : off+n]
		if got, want := plainChunks(s), firstNeedingLook(s); got != want {
			t.Fatalf("plainChunks on %d bytes at offset %d = %d, want %d", n, off, got, want)
		}
	}
}

// plainChunks reads nothing outside a slice shorter than one chunk.
func TestPlainChunksShort(t *testing.T) {
	for n := range 16 {
		if got := plainChunks(make([]byte, n, n)); got != 0 {
			t.Fatalf("plainChunks of %d bytes = %d, want 0", n, got)
		}
	}
}
