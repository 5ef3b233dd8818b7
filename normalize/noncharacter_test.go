package normalize

import (
	"fmt"
	"testing"
	"unicode/utf16"
)

// noncharacters lists the 66 code points RFC 7493 §2.1 forbids.
func noncharacters() []rune {
	var rs []rune
	for r := rune(0xFDD0); r <= 0xFDEF; r++ {
		rs = append(rs, r)
	}
	for plane := rune(0); plane <= 0x10; plane++ {
		rs = append(rs, plane<<16|0xFFFE, plane<<16|0xFFFF)
	}
	return rs
}

// escapeRune writes r as JSON \u escapes (a surrogate pair above U+FFFF).
func escapeRune(r rune) string {
	if r < 0x10000 {
		return fmt.Sprintf(`\u%04X`, r)
	}
	hi, lo := utf16.EncodeRune(r)
	return fmt.Sprintf(`\u%04x\u%04X`, hi, lo)
}

func TestNoncharactersRejected(t *testing.T) {
	rs := noncharacters()
	if len(rs) != 66 {
		t.Fatalf("%d noncharacters, want 66", len(rs))
	}
	for _, r := range rs {
		for _, form := range []string{"raw", "escaped"} {
			text := string(r)
			if form == "escaped" {
				text = escapeRune(r)
			}
			for _, doc := range []struct {
				src string
				off int64
			}{
				{`["ok","ab` + text + `c"]`, 9},
				{`{"k` + text + `":1}`, 3},
			} {
				err := Validate([]byte(doc.src), Options{})
				se, ok := err.(*SyntaxError)
				if !ok || se.Code() != CodeNoncharacter || se.Offset != doc.off {
					t.Errorf("%s U+%04X in %q: got %v, want noncharacter at offset %d", form, r, doc.src, err, doc.off)
				}
			}
		}
	}
}

func TestNoncharacterNeighboursAccepted(t *testing.T) {
	for _, r := range []rune{0xFDCF, 0xFDF0, 0xFFFD, 0xFEFF, 0x1FFFD, 0x20000, 0xEFFFD, 0x10FFFD, 0x10000, 0xE000} {
		for _, text := range []string{string(r), escapeRune(r)} {
			if _, err := Canonicalize([]byte(`["` + text + `"]`)); err != nil {
				t.Errorf("U+%04X (%q): %v", r, text, err)
			}
		}
	}
}
