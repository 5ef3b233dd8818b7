package conformance

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Generated returns n vectors over documents generated from seed: request
// bodies of every schema and arbitrary JSON, written with random
// whitespace, escapes and number spellings, and reaching the edges of the
// rules (noncharacters, surrogates, the double range, duplicate names,
// depth, the routing window), some of them then damaged byte by byte so
// that rejections and their offsets are compared too. The expected
// results come from the Go reference, as for vectors.json; the Python and
// TypeScript suites fetch the same vectors with `go run
// ./clients/conformance/fuzzgen -seed S -n N` and check them, which makes
// a differential fuzz of the three encoders. The same seed and n always give
// the same vectors.
func Generated(seed uint64, n int) ([]Vector, error) {
	g := &docGen{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	out := make([]Vector, 0, n)
	for i := range n {
		c := g.testCase()
		c.name = fmt.Sprintf("gen_%d_%d", seed, i)
		v, err := run(c)
		if err != nil {
			return nil, fmt.Errorf("%s (input %q): %w", c.name, c.input, err)
		}
		out = append(out, v)
	}
	return out, nil
}

type docGen struct {
	rng *rand.Rand
	b   strings.Builder
}

func (g *docGen) chance(p float64) bool { return g.rng.Float64() < p }

func (g *docGen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

func (g *docGen) testCase() testCase {
	c := testCase{mode: "auto"}
	switch r := g.rng.IntN(13); {
	case r < 1:
		c.mode = "chat"
	case r < 2:
		c.mode = "completion"
	case r < 3:
		c.mode = "native"
	case r < 4:
		c.mode = "responses"
	case r < 5:
		c.mode = "messages"
	case r < 6:
		c.mode = "pooling"
	}
	if g.chance(0.1) {
		c.group = g.pick([]string{"tenant-a", "g", "Group 7"})
	}
	long := g.chance(0.08)
	if long {
		c.prefix = 1024
	}
	g.b.Reset()
	switch g.rng.IntN(9) {
	case 0, 1:
		g.chat(long)
	case 2:
		g.completion(long)
	case 3:
		g.native(long)
	case 4:
		g.object(0, 4)
	case 5:
		g.responses(long)
		c.mode = g.ownMode(c.mode, "responses")
	case 6:
		g.messages(long)
		c.mode = g.ownMode(c.mode, "messages")
	case 7:
		g.pooling(long)
		c.mode = g.ownMode(c.mode, "pooling")
	default:
		g.value(0, 3)
	}
	doc := []byte(g.b.String())
	if g.chance(0.15) {
		doc = g.damage(doc)
	}
	c.input = doc
	return c
}

// ws writes insignificant whitespace now and then.
func (g *docGen) ws() {
	if g.chance(0.15) {
		g.b.WriteString(g.pick([]string{" ", "\n", "\t", "\r\n  ", "  "}))
	}
}

// members writes an object from name/value writers, in a random order.
func (g *docGen) members(ms []func()) {
	g.rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	g.b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			g.b.WriteByte(',')
		}
		g.ws()
		m()
		g.ws()
	}
	g.b.WriteByte('}')
}

func (g *docGen) member(name string, val func()) func() {
	return func() {
		g.str(name)
		g.ws()
		g.b.WriteByte(':')
		g.ws()
		val()
	}
}

// sampling adds generation parameters and volatile metadata.
func (g *docGen) sampling(ms []func()) []func() {
	for _, name := range []string{"temperature", "top_p", "max_tokens", "seed", "user", "stream", "metadata", "request_id", "stream_options", "priority"} {
		if g.chance(0.25) {
			ms = append(ms, g.member(name, func() { g.value(1, 2) }))
		}
	}
	return ms
}

func (g *docGen) text(long bool) func() {
	return func() {
		if long {
			g.longString()
			return
		}
		g.randomString(g.rng.IntN(24))
	}
}

func (g *docGen) chat(long bool) {
	var ms []func()
	if g.chance(0.9) {
		ms = append(ms, g.member("model", func() { g.str(g.pick([]string{"m", "llama-3.1-8b", "é/😀"})) }))
	}
	if g.chance(0.2) {
		ms = append(ms, g.member("tools", func() { g.value(1, 3) }))
	}
	if g.chance(0.1) {
		ms = append(ms, g.member("prompt_cache_key", func() { g.str(g.pick([]string{"pk", "tenant-b"})) }))
	}
	ms = append(ms, g.member("messages", func() {
		g.b.WriteByte('[')
		n := g.rng.IntN(5)
		for i := range n {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.ws()
			if g.chance(0.05) {
				g.value(2, 2)
				continue
			}
			var mm []func()
			if g.chance(0.95) {
				mm = append(mm, g.member("role", func() { g.str(g.pick([]string{"system", "user", "assistant", "tool"})) }))
			}
			switch r := g.rng.IntN(10); {
			case r < 6:
				mm = append(mm, g.member("content", g.text(long && i == 0)))
			case r < 8:
				mm = append(mm, g.member("content", func() {
					g.b.WriteByte('[')
					for j := range 1 + g.rng.IntN(3) {
						if j > 0 {
							g.b.WriteByte(',')
						}
						if g.chance(0.7) {
							g.members([]func(){
								g.member("type", func() { g.str("text") }),
								g.member("text", g.text(false)),
							})
						} else {
							g.value(3, 2)
						}
					}
					g.b.WriteByte(']')
				}))
			case r < 9:
				mm = append(mm, g.member("content", func() { g.value(2, 2) }))
			}
			if g.chance(0.1) {
				mm = append(mm, g.member("name", g.text(false)))
			}
			g.members(mm)
		}
		g.b.WriteByte(']')
	}))
	g.members(g.sampling(ms))
}

func (g *docGen) completion(long bool) {
	ms := []func(){g.member("model", func() { g.str("m") })}
	ms = append(ms, g.member("prompt", func() {
		if g.chance(0.6) {
			g.text(long)()
			return
		}
		g.b.WriteByte('[')
		for i := range g.rng.IntN(4) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			switch g.rng.IntN(3) {
			case 0:
				g.text(false)()
			case 1:
				g.b.WriteString(strconv.Itoa(g.rng.IntN(50000)))
			default:
				g.b.WriteString("[1,2," + strconv.Itoa(g.rng.IntN(9)) + "]")
			}
		}
		g.b.WriteByte(']')
	}))
	if g.chance(0.2) {
		ms = append(ms, g.member("suffix", g.text(false)))
	}
	g.members(g.sampling(ms))
}

func (g *docGen) native(long bool) {
	ms := []func(){g.member("inputs", g.text(long))}
	if g.chance(0.7) {
		ms = append(ms, g.member("parameters", func() { g.object(1, 2) }))
	}
	g.members(g.sampling(ms))
}

// value writes any JSON value, nesting at most max more levels.
func (g *docGen) value(depth, max int) {
	r := g.rng.IntN(10)
	if depth >= max && r >= 7 {
		r = g.rng.IntN(7)
	}
	switch {
	case r < 3:
		g.randomString(g.rng.IntN(12))
	case r < 5:
		g.number()
	case r < 6:
		g.b.WriteString(g.pick([]string{"true", "false", "null"}))
	case r < 8:
		g.b.WriteByte('[')
		for i := range g.rng.IntN(4) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.ws()
			g.value(depth+1, max)
		}
		g.b.WriteByte(']')
	default:
		g.object(depth+1, max)
	}
}

// memberNames is a small pool, so that names repeat (duplicates) and share
// prefixes (order).
var memberNames = []string{"a", "b", "ab", "aa", "A", "_", "0", "é", "😀", "\ue000", "\ufffd", "model", "messages", "prompt", "inputs", "user", "stream", "temperature", "x\u0000y", "\"q", "\\", "z/"}

func (g *docGen) object(depth, max int) {
	var ms []func()
	for range g.rng.IntN(5) {
		name := g.pick(memberNames)
		if g.chance(0.3) {
			name += strconv.Itoa(g.rng.IntN(3))
		}
		ms = append(ms, g.member(name, func() { g.value(depth, max) }))
	}
	g.members(ms)
}

// runes is the palette strings are drawn from: plain and multi-byte
// characters, characters that must or may be escaped, characters RFC 8785
// keeps raw, the edges of the UTF-16 order, and (rarely) noncharacters.
var runes = []rune{'a', 'b', 'Z', '0', ' ', '.', '/', '"', '\\', '\n', '\t', 0, 0x1f, 0x7f, 'é', '€', 'ß',
	0x2028, 0x2029, 0xfeff, 0xe000, 0xfffd, 0xfdcf, 0xfdf0, 0x1f600, 0x10000, 0x10fffd, 0x1d11e, 0x0301}

var noncharacterRunes = []rune{0xfdd0, 0xfdef, 0xfffe, 0xffff, 0x1fffe, 0x10ffff}

func (g *docGen) randomString(n int) {
	g.b.WriteByte('"')
	nonchar := -1
	if g.chance(0.01) {
		nonchar = g.rng.IntN(n + 1)
	}
	for i := range n + 1 {
		if i == nonchar {
			g.writeRune(noncharacterRunes[g.rng.IntN(len(noncharacterRunes))])
		}
		if i < n {
			g.writeRune(runes[g.rng.IntN(len(runes))])
		}
	}
	if g.chance(0.005) {
		g.b.WriteString(g.pick([]string{`\ud800`, `\udc00x`, `\ud83d\ud83d`}))
	}
	g.b.WriteByte('"')
}

// writeRune writes r inside a string: raw when JSON allows it, else (and
// sometimes anyway) escaped, with short escapes or \u in either case.
func (g *docGen) writeRune(r rune) {
	mustEscape := r < 0x20 || r == '"' || r == '\\'
	if !mustEscape && !g.chance(0.2) {
		g.b.WriteRune(r)
		return
	}
	short := map[rune]string{'"': `\"`, '\\': `\\`, '\n': `\n`, '\t': `\t`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\r': `\r`}
	if s, ok := short[r]; ok && g.chance(0.7) {
		g.b.WriteString(s)
		return
	}
	hex := "%04x"
	if g.chance(0.5) {
		hex = "%04X"
	}
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		fmt.Fprintf(&g.b, `\u`+hex+`\u`+hex, hi, lo)
		return
	}
	fmt.Fprintf(&g.b, `\u`+hex, r)
}

func (g *docGen) str(s string) {
	g.b.WriteByte('"')
	for _, r := range s {
		g.writeRune(r)
	}
	g.b.WriteByte('"')
}

// longString writes a string of 900 to 9,000 characters, so that windows,
// spill keys and cuts inside multi-byte characters are exercised.
func (g *docGen) longString() {
	n := 900 + g.rng.IntN(8100)
	g.b.WriteByte('"')
	unit := []rune("Doc é€😀 text ")
	for i := range n {
		g.writeRune(unit[(i+g.rng.IntN(2))%len(unit)])
	}
	g.b.WriteByte('"')
}

func (g *docGen) digits(n int) string {
	var s strings.Builder
	for i := range n {
		d := g.rng.IntN(10)
		if i == 0 && d == 0 {
			d = 1
		}
		s.WriteByte(byte('0' + d))
	}
	return s.String()
}

// number writes a number literal: small and big integers (up to past the
// double range), fractions, exponents near overflow and underflow, -0.
func (g *docGen) number() {
	if g.chance(0.3) {
		g.b.WriteByte('-')
	}
	r := g.rng.IntN(6)
	if g.chance(0.1) {
		r = 6 + g.rng.IntN(5) // the edges of the double range
	}
	if g.chance(0.0005) {
		r = 11 // a 100,000-digit mantissa and a six-digit exponent
	}
	switch r {
	case 0:
		g.b.WriteString(strconv.Itoa(g.rng.IntN(1000)))
	case 1:
		g.b.WriteString(g.digits(1 + g.rng.IntN(25)))
	case 2:
		g.b.WriteString(g.digits(1+g.rng.IntN(6)) + "." + g.digits(1+g.rng.IntN(20)))
	case 3:
		g.b.WriteString("0." + strings.Repeat("0", g.rng.IntN(8)) + g.digits(1+g.rng.IntN(5)))
	case 4, 5:
		e := g.pick([]string{"e", "E"}) + g.pick([]string{"", "+", "-"})
		g.b.WriteString(g.digits(1) + "." + g.digits(g.rng.IntN(17)+1) + e + strconv.Itoa(g.rng.IntN(40)))
	case 9:
		g.b.WriteString(g.digits(300 + g.rng.IntN(15)))
	case 10:
		n := 750 + g.rng.IntN(300)
		g.b.WriteString(g.digits(n) + "e-" + strconv.Itoa(n-330+g.rng.IntN(660)))
	case 11:
		g.b.WriteString(g.digits(100000) + "." + g.digits(3) + "e-" + strconv.Itoa(99700+g.rng.IntN(600)))
	case 6:
		g.b.WriteString(g.pick([]string{"0", "0.0", "0e0", "0.000e-999", "1e-323", "2.4703282292062328e-324",
			"2.4703282292062327e-324", "1.7976931348623157e308", "1.7976931348623159e308", "5e-324", "1e21", "1e-7", "9007199254740993"}))
	case 7:
		g.b.WriteString(g.digits(1) + "e" + g.pick([]string{"-", "+", ""}) + strconv.Itoa(300+g.rng.IntN(30)))
	case 8:
		g.b.WriteString(g.digits(1+g.rng.IntN(3)) + "." + g.digits(1+g.rng.IntN(3)) + "e-" + strconv.Itoa(310+g.rng.IntN(20)))
	}
}

// damage makes a valid document (usually) invalid: truncation, a stray or
// invalid UTF-8 byte, a deleted or doubled byte, a trailing comma.
func (g *docGen) damage(doc []byte) []byte {
	if len(doc) == 0 {
		return doc
	}
	at := g.rng.IntN(len(doc))
	out := append([]byte(nil), doc[:at]...)
	switch g.rng.IntN(6) {
	case 0:
		return out
	case 1:
		out = append(out, g.pick([]string{"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xef\xbf\xbe", "\x01", ","})...)
		return append(out, doc[at:]...)
	case 2:
		return append(out, doc[at+1:]...)
	case 3:
		return append(append(out, doc[at]), doc[at:]...)
	case 4:
		out = append(out, g.pick([]string{"\\", "\"", "//", "'", "NaN", "01", "1.", "-"})...)
		return append(out, doc[at:]...)
	}
	return append(doc[:len(doc)-1:len(doc)-1], ",]"...)
}
