package server

import (
	"strings"
	"testing"
)

// TestStickyTableEvictsTheLeastRecentlyUsed: past its bound the table
// forgets the key used longest ago; a get counts as a use; over-long keys
// are not kept.
func TestStickyTableEvictsTheLeastRecentlyUsed(t *testing.T) {
	st := newStickyTable(3)
	st.put("a", "b1")
	st.put("b", "b2")
	st.put("c", "b3")
	st.get("a") // a is now the most recent: b goes next
	st.put("d", "b1")
	for key, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := st.get(key); ok != want {
			t.Errorf("key %s kept = %v, want %v", key, ok, want)
		}
	}
	st.put("c", "b2") // a new backend for a known key
	if got, _ := st.get("c"); got != "b2" || st.len() != 3 {
		t.Errorf("c on %s, %d keys", got, st.len())
	}
	st.put(strings.Repeat("x", maxStickyKeyBytes+1), "b1")
	if st.len() != 3 {
		t.Errorf("an over-long key was kept")
	}
	off := newStickyTable(0)
	off.put("a", "b")
	if off.len() != 0 {
		t.Errorf("a table of size 0 kept a key")
	}
}
