package normalize

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// refStr is the string scan as it was before it jumped over words: byte by
// byte outside runs of plain words, every escape through escape. The word
// scans must agree with it on every input: the end, the escape flags, and
// the error's code and offset.
func refStr(p *parser, i int) (end int, esc, fix bool, err error) {
	s := p.src
	open := i
	i++
	for {
		if i >= len(s) {
			return i, esc, fix, newErr(i, CodeUnexpectedEnd, ErrInvalid, "unexpected end of input in string starting at offset %d", open)
		}
		c := s[i]
		switch {
		case c == '"':
			return i, esc, fix, nil
		case c == '\\':
			esc = true
			n, _, err := p.escape(i)
			if err != nil {
				return i, esc, fix, err
			}
			if !canonicalEscape(s[i : i+n]) {
				fix = true
			}
			i += n
		case c < 0x20:
			return i, esc, fix, newErr(i, CodeControlCharacter, ErrInvalid, "unescaped control character %s in string", describe(c))
		case c < 0x80:
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return i, esc, fix, newErr(i, CodeInvalidUTF8, ErrInvalid, "invalid UTF-8 %s in string", describe(c))
			}
			if isNoncharacter(r) {
				return i, esc, fix, noncharacterErr(i, r)
			}
			i += size
		}
	}
}

// refUnescaped decodes a validated string body one byte at a time.
func refUnescaped(s []byte) []byte {
	var dst []byte
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			dst = append(dst, s[i])
			i++
			continue
		}
		switch e := s[i+1]; e {
		case 'b', 'f', 'n', 'r', 't':
			dst = append(dst, map[byte]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[e])
			i += 2
		case 'u':
			r := hexVal(s[i+2 : i+6])
			i += 6
			if r >= 0xD800 && r <= 0xDBFF {
				r = 0x10000 + (r-0xD800)<<10 + (hexVal(s[i+2:i+6]) - 0xDC00)
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
		default:
			dst = append(dst, e)
			i += 2
		}
	}
	return dst
}

// checkStringScan runs str and refStr over the string opening at src[0],
// as a value, as a key and with the text decoded, and, when it is valid,
// checks the text str decoded and appendUnescaped against refUnescaped.
func checkStringScan(t *testing.T, src []byte) {
	t.Helper()
	for _, how := range []struct{ isKey, decode bool }{{false, false}, {true, false}, {false, true}} {
		p := newParser()
		p.reset(src, Options{}.withDefaults())
		p.decodeText = how.decode
		// Text decoded before this string must stay as it is.
		p.keybuf = append(p.keybuf, "before"...)
		wantEnd, wantEsc, wantFix, wantErr := refStr(p, 0)
		gotNext, gotErr := p.str(0, how.isKey)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: error %v, want %v", src, gotErr, wantErr)
		}
		if wantErr != nil {
			g, w := gotErr.(*SyntaxError), wantErr.(*SyntaxError)
			if g.Offset != w.Offset || g.Code() != w.Code() || g.Reason != w.Reason {
				t.Fatalf("%q: error %v (%s), want %v (%s)", src, g, g.Code(), w, w.Code())
			}
			continue
		}
		n := p.nodes[len(p.nodes)-1]
		if gotNext != wantEnd+1 || int(n.end) != wantEnd || n.esc != wantEsc || n.fix != wantFix {
			t.Fatalf("%q: end %d esc %v fix %v, want %d %v %v", src, n.end, n.esc, n.fix, wantEnd, wantEsc, wantFix)
		}
		want := refUnescaped(src[1:wantEnd])
		if wantDecoded := n.esc && (how.isKey || how.decode); n.decoded() != wantDecoded {
			t.Fatalf("%q (key %v, decode %v): decoded %v", src, how.isKey, how.decode, n.decoded())
		}
		if string(p.keybuf[:6]) != "before" {
			t.Fatalf("%q: the text decoded before this string was overwritten: %q", src, p.keybuf)
		}
		if n.decoded() && !bytes.Equal(p.keybuf[n.m0:n.m0+n.cnt], want) {
			t.Fatalf("%q: decoded %q, want %q", src, p.keybuf[n.m0:n.m0+n.cnt], want)
		}
		if got := p.appendText(nil, int32(len(p.nodes)-1)); !bytes.Equal(got, want) {
			t.Fatalf("%q: appendText %q, want %q", src, got, want)
		}
	}
	end, _, _, err := refStr(&parser{src: src}, 0)
	if err != nil {
		return
	}
	body := src[1:end]
	want := refUnescaped(body)
	// A prefix in dst must be kept as it is.
	for _, prefix := range []string{"", "pre"} {
		got := appendUnescaped([]byte(prefix), body)
		if !bytes.Equal(got, append([]byte(prefix), want...)) {
			t.Fatalf("appendUnescaped(%q) = %q, want %q", body, got[len(prefix):], want)
		}
	}
}

// Pieces an attacker places at every offset of a string: invalid and
// truncated UTF-8, encoded surrogates, overlong forms, noncharacters raw
// and escaped, lone and paired surrogate escapes, every kind of escape,
// bad escapes, control bytes, quotes and the string's end.
var scanPieces = []string{
	"\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xc2", "\xc2\x7f", "\xc2\x80", "\xdf\xbf",
	"\xe0\x80\x80", "\xe0\x9f\xbf", "\xe0\xa0\x80", "\xe2\x82", "\xe2\x82\xac",
	"\xed\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xef\xb7\x8f", "\xef\xb7\x90", "\xef\xb7\xaf",
	"\xef\xb7\xb0", "\xef\xbf\xbd", "\xef\xbf\xbe", "\xef\xbf\xbf",
	"\xf0\x8f\xbf\xbf", "\xf0\x90\x80\x80", "\xf0\x9f\x98\x80", "\xf0\x9f\xbf\xbe", "\xf3\xbf\xbf\xbf",
	"\xf4\x8f\xbf\xbd", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\xfe",
	`\n`, `\t`, `\b`, `\f`, `\r`, `\"`, `\\`, `\/`, `\u0000`, `\u001f`, `\u001F`, `\u0008`, `\u000a`,
	`\u0020`, `\u00e9`, `\u00E9`, `\u20ac`, `\ud83d\ude00`, `\uD83D\uDE00`, `\ud83d`, `\ud83d\n`,
	`\ud83dx`, `\ud83d\u0041`, `\udc00`, `\ufdd0`, `\uffff`, `\ud83f\udffe`, `\u12`, `\u12g4`, `\x`,
	`\`, `\u`, "\x00", "\x1f", "\x7f", "\t", `"`, "~", " ",
}

// TestStringScanMatchesBytewise places every piece at every offset of
// plain strings of every length up to 40 (so at every position of a word
// and across word ends), with and without a closing quote, and pairs of
// pieces at nearby offsets.
func TestStringScanMatchesBytewise(t *testing.T) {
	plain := "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"
	for n := 0; n <= 40; n++ {
		for off := 0; off <= n; off++ {
			for _, piece := range scanPieces {
				body := plain[:off] + piece + plain[off:n]
				checkStringScan(t, []byte(`"`+body+`"`))
				checkStringScan(t, []byte(`"`+body))
				checkStringScan(t, []byte(`"`+body+`"x`))
			}
		}
	}
	for off := 0; off <= 17; off++ {
		for gap := 0; gap <= 9; gap++ {
			for _, a := range scanPieces {
				for k := 0; k < len(scanPieces); k += 4 {
					b := scanPieces[k]
					body := plain[:off] + a + plain[:gap] + b + plain[:17-off]
					checkStringScan(t, []byte(`"`+body+`"`))
				}
			}
		}
	}
}

// TestStringScanRandomStrings compares the scans on random mixes of the
// pieces and of long runs of ASCII and multi-byte text.
func TestStringScanRandomStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 8))
	runs := []string{"plain words and more plain words ", "café naïve 東京 ", "€", "😀"}
	for range 20000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(12) {
			if rng.IntN(3) == 0 {
				b.WriteString(scanPieces[rng.IntN(len(scanPieces))])
			} else {
				b.WriteString(strings.Repeat(runs[rng.IntN(len(runs))], 1+rng.IntN(4)))
			}
		}
		if rng.IntN(8) != 0 {
			b.WriteByte('"')
		}
		checkStringScan(t, []byte(b.String()))
	}
}

// The lowest flag of attention and backslashes is the first byte that
// needs a look, whatever follows it: every byte value at every position
// after a run of plain bytes, then every pair of odd bytes.
func TestScanMasksFindTheFirstByte(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	first := func(w [8]byte, want func(byte) bool) int {
		for i, c := range w {
			if want(c) {
				return i
			}
		}
		return 8
	}
	check := func(w [8]byte) {
		v := binary.LittleEndian.Uint64(w[:])
		if got, want := bits.TrailingZeros64(attention(v))>>3, first(w, func(c byte) bool { return !plain(c) }); got != want {
			t.Fatalf("attention(%q) flags byte %d first, want %d", w[:], got, want)
		}
		if got, want := bits.TrailingZeros64(backslashes(v))>>3, first(w, func(c byte) bool { return c == '\\' }); got != want {
			t.Fatalf("backslashes(%q) flags byte %d first, want %d", w[:], got, want)
		}
	}
	base := [8]byte{'a', 'b', ' ', '~', 'Z', '!', '#', '['}
	for pos := range 8 {
		for c := range 256 {
			w := base
			w[pos] = byte(c)
			check(w)
		}
	}
	odd := []byte{0x00, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	for i := range 8 {
		for j := range 8 {
			for _, a := range odd {
				for _, b := range odd {
					w := base
					w[i], w[j] = a, b
					check(w)
				}
			}
		}
	}
}

// FuzzStringScan: the word scans agree with the byte-by-byte ones on any
// bytes inside a string.
func FuzzStringScan(f *testing.F) {
	for _, p := range scanPieces {
		f.Add([]byte(p + "0123456789abcdef" + p))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStringScan(t, append([]byte{'"'}, data...))
	})
}
