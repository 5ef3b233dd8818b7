//go:build !amd64 || purego

package normalize

import (
	"encoding/binary"
	"math/bits"
)

// plainChunks returns the index of the first byte of s that a string cannot
// hold without a closer look (see attention), or len(s), as the amd64
// version does; s must hold at least 16 bytes (it returns 0 for a shorter
// s). Here it tests two words per branch, and the last eight bytes of s as
// one word that overlaps bytes already found plain.
func plainChunks(s []byte) int {
	if len(s) < 16 {
		return 0
	}
	i := 0
	for i+16 <= len(s) {
		m0 := attention(binary.LittleEndian.Uint64(s[i:]))
		m1 := attention(binary.LittleEndian.Uint64(s[i+8:]))
		if m0|m1 != 0 {
			if m0 != 0 {
				return i + bits.TrailingZeros64(m0)>>3
			}
			return i + 8 + bits.TrailingZeros64(m1)>>3
		}
		i += 16
	}
	if i+8 <= len(s) {
		if m := attention(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	if i == len(s) {
		return i
	}
	last := len(s) - 8
	if m := attention(binary.LittleEndian.Uint64(s[last:])); m != 0 {
		return last + bits.TrailingZeros64(m)>>3
	}
	return len(s)
}
