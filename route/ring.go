package route

import (
	"math/bits"
	"slices"
	"strconv"

	"github.com/zeebo/xxh3"
)

// ring is an immutable consistent-hash ring: VirtualNodes positions per
// member, each the top 32 bits of xxh3("name#i"). A key belongs to the first
// position at or after the key's top 32 bits, wrapping at the end.
//
// 32-bit positions halve the memory of 64-bit ones (8 bytes per virtual node
// with the owner index); they cost nothing in balance, since an arc is never
// near 2^-32 of the circle.
// vnode keeps a position and its owner side by side: a lookup touches one
// cache line, not one in each of two arrays.
type vnode struct {
	pos   uint32
	owner uint32 // member index (in name order)
}

type ring struct {
	vn    []vnode  // sorted by position
	lut   []uint32 // lut[b] is the first i with pos[i]>>shift >= b; len 2^k+1
	shift uint     // 32 - k
	share []float64
}

// buildRing places vnodes positions for each name. names must be sorted so
// that ties between equal positions (vanishingly rare) break the same way
// whatever order the caller listed members in.
func buildRing(names []string, vnodes int) *ring {
	total := len(names) * vnodes
	packed := make([]uint64, 0, total)
	buf := make([]byte, 0, 64)
	for i, name := range names {
		for v := 0; v < vnodes; v++ {
			buf = append(buf[:0], name...)
			buf = append(buf, '#')
			buf = strconv.AppendInt(buf, int64(v), 10)
			p := uint32(xxh3.Hash(buf) >> 32)
			packed = append(packed, uint64(p)<<32|uint64(i))
		}
	}
	slices.Sort(packed)
	r := &ring{
		vn:    make([]vnode, total),
		share: make([]float64, len(names)),
	}
	for i, p := range packed {
		r.vn[i] = vnode{pos: uint32(p >> 32), owner: uint32(p)}
	}
	// About four positions per lookup bucket: the bucket narrows the binary
	// search to a handful of entries for a quarter of the ring's memory.
	k := 0
	if total > 4 {
		k = bits.Len(uint(total/4)) - 1
	}
	r.shift = uint(32 - k)
	r.lut = make([]uint32, 1<<k+1)
	j := 0
	for b := 0; b <= 1<<k; b++ {
		for j < total && uint64(r.vn[j].pos)>>r.shift < uint64(b) {
			j++
		}
		r.lut[b] = uint32(j)
	}
	if total > 0 {
		prev := uint64(r.vn[total-1].pos)
		for _, v := range r.vn {
			p := v.pos
			arc := (uint64(p) - prev) & (1<<32 - 1)
			if total == 1 {
				arc = 1 << 32
			}
			r.share[v.owner] += float64(arc) / (1 << 32)
			prev = uint64(p)
		}
	}
	return r
}

// search returns the index of the first position at or after key (wrapping).
// The ring must not be empty.
func (r *ring) search(key uint64) int {
	k := uint32(key >> 32)
	b := k >> r.shift
	lo, hi := int(r.lut[b]), int(r.lut[b+1])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.vn[m].pos < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(r.vn) {
		return 0
	}
	return lo
}
