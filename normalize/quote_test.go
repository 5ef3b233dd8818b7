package normalize

import (
	"strings"
	"testing"
)

// TestQuoteShort pins the quoting rule for names in error messages, which
// the Python and TypeScript SDKs implement byte for byte.
func TestQuoteShort(t *testing.T) {
	cases := []struct{ in, want string }{
		{"model", `"model"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\a\b\f\n\r\t\v", `"\a\b\f\n\r\t\v"`},
		{"\x00\x01\x1f\x7f", `"\x00\x01\x1f\x7f"`},
		{"\u0080\u00a0\u00e9", `"\u0080\u00a0\u00e9"`},
		{"a\u2028b\ufeff", `"a\u2028b\ufeff"`},
		{"😀", `"\U0001f600"`},
		{strings.Repeat("x", 64), `"` + strings.Repeat("x", 64) + `"`},
		{strings.Repeat("x", 65), `"` + strings.Repeat("x", 64) + `"...`},
		// A character that crosses byte 64 is left out whole.
		{strings.Repeat("x", 63) + "é", `"` + strings.Repeat("x", 63) + `"...`},
		{strings.Repeat("x", 62) + "€", `"` + strings.Repeat("x", 62) + `"...`},
		{strings.Repeat("x", 61) + "😀", `"` + strings.Repeat("x", 61) + `"...`},
		{strings.Repeat("x", 60) + "😀", `"` + strings.Repeat("x", 60) + `\U0001f600"`},
	}
	for _, c := range cases {
		if got := quoteShort([]byte(c.in)); got != c.want {
			t.Errorf("quoteShort(%+q) = %s, want %s", c.in, got, c.want)
		}
	}
}
