package normalize

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// TestLayOutRoutingText: over generated requests in every mode, the laid
// out routing text is as long as the key's (RoutingTextLen with the
// largest window), and every segment holds its value where it says: a
// string's decoded text, or the value's canonical JSON.
func TestLayOutRoutingText(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 3))
	modes := []Mode{ModeChat, ModeCompletion, ModeNative}
	checked, segs := 0, 0
	for i := 0; i < 2000; i++ {
		body := spell(genRequest(r), r, r.IntN(2) == 0)
		mode := modes[r.IntN(len(modes))]
		canon, _, err := Normalize(nil, body, Options{Mode: ModeAuto}, KeyOptions{Mode: ModeAuto})
		if err != nil {
			continue
		}
		ri, err := RouteKey(canon, KeyOptions{Mode: mode, PrefixLength: MaxPrefixLength})
		if err != nil {
			continue // the body does not fit mode's schema
		}
		lay, err := LayOutRoutingText(canon, mode)
		if err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		n := utf8.RuneCount(lay.Text)
		if mode == ModeNative {
			n = len(lay.Text)
		}
		if min(n, MaxPrefixLength) != ri.RoutingTextLen {
			t.Fatalf("body %d (%v): laid out %d units, the key read %d\n%s", i, mode, n, ri.RoutingTextLen, canon)
		}
		end := 0
		for _, s := range lay.Segments {
			if s.Start < end || s.End < s.Start || s.End > len(lay.Text) {
				t.Fatalf("body %d: segment %+v out of order or out of the text (%d bytes)", i, s, len(lay.Text))
			}
			end = s.End
			got, v := lay.Text[s.Start:s.End], canon[s.ValueStart:s.ValueEnd]
			if s.JSON {
				if !bytes.Equal(got, v) {
					t.Fatalf("body %d: JSON segment holds %q, the value is %q", i, got, v)
				}
				continue
			}
			if v[0] != '"' || !bytes.Equal(got, appendUnescaped(nil, v[1:len(v)-1])) {
				t.Fatalf("body %d: text segment holds %q, the value is %s", i, got, v)
			}
		}
		checked++
		segs += len(lay.Segments)
	}
	if checked < 500 || segs < checked {
		t.Fatalf("checked %d bodies with %d segments", checked, segs)
	}
}
