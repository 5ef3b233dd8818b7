package normalize

import (
	"encoding/binary"
	"math/bits"
)

// XXH3's default secret, bytes 0 to 63 read as little-endian words, and
// its first 64-bit prime: what XXH3-64 reads for an input of 17 to 128
// bytes of which these are the first 64 (see the xxHash specification).
const (
	xxhSecret0 = 0xbe4ba423396cfeb8
	xxhSecret1 = 0x1cad21f72c81017c
	xxhSecret2 = 0xdb979083e96dd4de
	xxhSecret3 = 0x1f67b3b7a4a44072
	xxhSecret4 = 0x78e5c0cc4ee679cb
	xxhSecret5 = 0x2172ffcc7dd05a82
	xxhSecret6 = 0x8e2443f7744608b8
	xxhSecret7 = 0x4c263a81e69035e0
	xxhPrime1  = 0x9e3779b185ebca87
	// blockPrime is BlockSize × xxhPrime1 modulo 2^64, the sum's start.
	blockPrime = BlockSize * xxhPrime1 % (1 << 64)
)

// hashBlock is xxh3.HashSeed(b, seed) for a block of exactly BlockSize
// bytes, the length of every block but a record's last. Written for that
// one length it has no branch on the length and no call: each of the four
// 16-byte lanes is folded through a 128-bit product with its slice of the
// secret, and the sum avalanched. The block hasher chains every block's
// hash into the next one's seed, so what a block costs is the latency of
// this function; TestHashBlockMatchesXXH3 holds it to the library's value.
func hashBlock(b []byte, seed uint64) uint64 {
	b = b[:BlockSize:BlockSize]
	acc := uint64(blockPrime)
	acc += fold(binary.LittleEndian.Uint64(b[0:])^(xxhSecret0+seed), binary.LittleEndian.Uint64(b[8:])^(xxhSecret1-seed))
	acc += fold(binary.LittleEndian.Uint64(b[48:])^(xxhSecret2+seed), binary.LittleEndian.Uint64(b[56:])^(xxhSecret3-seed))
	acc += fold(binary.LittleEndian.Uint64(b[16:])^(xxhSecret4+seed), binary.LittleEndian.Uint64(b[24:])^(xxhSecret5-seed))
	acc += fold(binary.LittleEndian.Uint64(b[32:])^(xxhSecret6+seed), binary.LittleEndian.Uint64(b[40:])^(xxhSecret7-seed))
	acc ^= acc >> 37
	acc *= 0x165667919e3779f9
	return acc ^ acc>>32
}

// fold is the 128-bit product of x and y, its halves XORed.
func fold(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}
