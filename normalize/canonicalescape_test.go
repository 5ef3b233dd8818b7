package normalize

import (
	"fmt"
	"testing"
)

// canonicalEscape must say "already canonical" for exactly the escapes
// that appendCanonicalEscapes writes back unchanged: every two-character
// escape, and \u with four hex digits in either case over the first 256
// code points and a sample of the rest (surrogate pairs included).
func TestCanonicalEscapeIsExactlyTheUnchangedOnes(t *testing.T) {
	var escapes []string
	for _, c := range `"\/bfnrt` {
		escapes = append(escapes, `\`+string(c))
	}
	for r := 0; r < 0x100; r++ {
		escapes = append(escapes, fmt.Sprintf(`\u%04x`, r), fmt.Sprintf(`\u%04X`, r))
	}
	for _, r := range []int{0x7ff, 0x800, 0xabcd, 0xFDCF, 0xfffd} {
		escapes = append(escapes, fmt.Sprintf(`\u%04x`, r), fmt.Sprintf(`\u%04X`, r))
	}
	escapes = append(escapes, `\ud83d\ude00`, `\uD83D\uDE00`)
	for _, esc := range escapes {
		unchanged := string(appendCanonicalEscapes(nil, []byte(esc))) == esc
		if got := canonicalEscape([]byte(esc)); got != unchanged {
			t.Errorf("canonicalEscape(%s) = %v; canonical form %q", esc, got, appendCanonicalEscapes(nil, []byte(esc)))
		}
		// And through the whole pipeline: the string with this escape
		// between other text canonicalizes as the escape-by-escape rewrite.
		src := `{"a":"x` + esc + `y` + `\n"}`
		want := `{"a":"x` + string(appendCanonicalEscapes(nil, []byte(esc))) + `y\n"}`
		if got, err := Canonicalize([]byte(src)); err != nil || string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", src, got, err, want)
		}
	}
}
