package sticky

import (
	"strings"
	"testing"
)

// TestTableEvictsTheLeastRecentlyUsed: past its bound the table
// forgets the key used longest ago; a get counts as a use; over-long keys
// are not kept.
func TestTableEvictsTheLeastRecentlyUsed(t *testing.T) {
	st := New(3)
	st.Put("a", "b1")
	st.Put("b", "b2")
	st.Put("c", "b3")
	st.Get("a") // a is now the most recent: b goes next
	st.Put("d", "b1")
	for key, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := st.Get(key); ok != want {
			t.Errorf("key %s kept = %v, want %v", key, ok, want)
		}
	}
	st.Put("c", "b2") // a new backend for a known key
	if got, _ := st.Get("c"); got != "b2" || st.Len() != 3 {
		t.Errorf("c on %s, %d keys", got, st.Len())
	}
	st.Put(strings.Repeat("x", MaxKeyBytes+1), "b1")
	if st.Len() != 3 {
		t.Errorf("an over-long key was kept")
	}
	off := New(0)
	off.Put("a", "b")
	if off.Len() != 0 {
		t.Errorf("a table of size 0 kept a key")
	}
}

// TestTenantKeyOfALongKeyIsKept: a key the callers accept (up to
// MaxKeyBytes) is remembered under the longest tenant name the
// configuration allows.
func TestTenantKeyOfALongKeyIsKept(t *testing.T) {
	tb := New(10)
	key := TenantKey(strings.Repeat("t", MaxTenantBytes), strings.Repeat("k", MaxKeyBytes))
	tb.Put(key, "b1")
	if got, ok := tb.Get(key); !ok || got != "b1" {
		t.Fatalf("Get = %q, %v; want b1, true", got, ok)
	}
}
