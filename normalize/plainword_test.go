package normalize

import (
	"encoding/binary"
	"testing"
)

// plainWord against a byte-by-byte check: every byte value in every
// position of a word of plain bytes, and pairs of non-plain bytes (where a
// borrow could hide one) in every two positions.
func TestPlainWordMatchesBytewise(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	check := func(w [8]byte) {
		want := true
		for _, c := range w {
			want = want && plain(c)
		}
		if got := plainWord(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("plainWord(%q) = %v, want %v", w[:], got, want)
		}
	}
	base := [8]byte{'a', 'b', ' ', '~', 'Z', '!', '#', '['}
	for pos := range 8 {
		for c := range 256 {
			w := base
			w[pos] = byte(c)
			check(w)
		}
	}
	odd := []byte{0x00, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0xa2, 0xff}
	for i := range 8 {
		for j := range 8 {
			for _, a := range odd {
				for _, b := range odd {
					w := base
					w[i], w[j] = a, b
					check(w)
				}
			}
		}
	}
}
