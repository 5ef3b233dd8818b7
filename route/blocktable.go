package route

import "math/rand/v2"

// blockTable maps block hashes to prefix index entries: open addressing
// with linear probing in one array of 8-byte slots, so that a lookup is a
// multiply, usually one slot read and one read of the entry record, inline
// in the pick's loop (a Go map of uint64 to uint32 takes 16 bytes a slot
// and a call per lookup).
//
// A slot holds the top 32 bits of the block hash's mixed value (its tag:
// the slot's home in the top bits, a fingerprint below) and the entry
// plus one; 0 is empty. The prefix index keeps each entry's hash in its
// record, so a lookup confirms a tag match against the full hash
// (prefixIndex.find). Removal shifts later slots of the probe run back
// (no tombstones), so probe runs depend only on the entries present.
//
// Block hashes are computed from request text, so a client can choose
// texts whose hashes share low or high bits. The slot is taken from the
// hash mixed with a seed drawn when the table is made, which the client
// cannot see, so it cannot aim many blocks at one probe run.
type blockTable struct {
	slots []uint64
	mask  uint64 // len(slots) - 1
	shift uint   // 64 - log2(len(slots)): home = mix(h) >> shift
	live  int
	seed  uint64
}

// minTableSlots is the size of an empty table.
const minTableSlots = 64

func newBlockTable() blockTable {
	return blockTable{
		slots: make([]uint64, minTableSlots),
		mask:  minTableSlots - 1,
		shift: 64 - 6,
		seed:  rand.Uint64(),
	}
}

// mix spreads h over 64 bits under the table's seed: every output bit
// depends on every input bit after the two multiplications.
func (t *blockTable) mix(h uint64) uint64 {
	x := (h ^ t.seed) * 0x9e3779b97f4a7c15
	x ^= x >> 29
	return x * 0xbf58476d1ce4e5b9
}

// home is the first slot a slot value's probe run may start from.
func (t *blockTable) home(s uint64) uint64 { return (s >> 32) >> (t.shift - 32) }

// add inserts entry e for h, which must not be in the table. The table
// grows to keep at most three quarters of its slots in use, which bounds
// the expected probe run of a miss to a few slots.
func (t *blockTable) add(h uint64, e uint32) {
	if (t.live+1)*4 > len(t.slots)*3 {
		t.double()
	}
	x := t.mix(h)
	t.place(x>>32<<32 | uint64(e+1))
	t.live++
}

// place puts slot value s in the first empty slot from its home.
func (t *blockTable) place(s uint64) {
	i := t.home(s)
	for t.slots[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = s
}

// double doubles the table: one more bit of each tag is its home.
func (t *blockTable) double() {
	old := t.slots
	t.slots = make([]uint64, 2*len(old))
	t.mask = uint64(len(t.slots) - 1)
	t.shift--
	for _, s := range old {
		if s != 0 {
			t.place(s)
		}
	}
}

// remove deletes entry e, whose hash is h.
func (t *blockTable) remove(h uint64, e uint32) {
	x := t.mix(h)
	want := x>>32<<32 | uint64(e+1)
	i := x >> t.shift
	for t.slots[i] != want {
		if t.slots[i] == 0 {
			return // not present: nothing to delete
		}
		i = (i + 1) & t.mask
	}
	// Shift back every later slot of the run that may live at i: one whose
	// home is not cyclically in (i, j].
	j := i
	for {
		j = (j + 1) & t.mask
		s := t.slots[j]
		if s == 0 {
			break
		}
		k := t.home(s)
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = 0
	t.live--
}

// bytes is the table's memory.
func (t *blockTable) bytes() int64 { return int64(len(t.slots)) * 8 }
