package normalize

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// jv is a generated JSON value; the writer spells it many ways.
type jv struct {
	kind    kind
	b       bool
	num     string // integer literal or a double's shortest form
	f       float64
	isFloat bool
	s       string
	elems   []jv
	names   []string
}

var nameRunes = []rune{'a', 'b', 'z', 'A', '1', 'é', '€', 0x2028, 0xE000, 0xFFFD, 0x1F600, 0x10000, 0, '\n', '"', '\\', '/', 0x7f}

func randString(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if r.IntN(3) == 0 {
			b.WriteRune(nameRunes[r.IntN(len(nameRunes))])
		} else {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return b.String()
}

func genValue(r *rand.Rand, depth int, allowBig bool) jv {
	k := r.IntN(7)
	if depth > 3 && k >= 5 {
		k = r.IntN(5)
	}
	switch k {
	case 0:
		return jv{kind: kNull}
	case 1:
		return jv{kind: kTrue + kind(r.IntN(2))*0, b: true}
	case 2:
		switch r.IntN(4) {
		case 0:
			return jv{kind: kNumber, num: strconv.Itoa(r.IntN(2000) - 1000)}
		case 1:
			if allowBig {
				return jv{kind: kNumber, num: "9007199254740993" + strconv.Itoa(r.IntN(1000))}
			}
			fallthrough
		default:
			var f float64
			switch r.IntN(3) {
			case 0:
				f = math.Float64frombits(r.Uint64())
				if math.IsNaN(f) || math.IsInf(f, 0) {
					f = 0.5
				}
			case 1:
				f = float64(r.IntN(1000000)) / 1000
			default:
				f = r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
			}
			return jv{kind: kNumber, f: f, isFloat: true}
		}
	case 3, 4:
		return jv{kind: kString, s: randString(r, r.IntN(12))}
	case 5:
		n := r.IntN(5)
		v := jv{kind: kArray}
		for i := 0; i < n; i++ {
			v.elems = append(v.elems, genValue(r, depth+1, allowBig))
		}
		return v
	default:
		n := r.IntN(6)
		v := jv{kind: kObject}
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			name := randString(r, 1+r.IntN(4))
			if seen[name] {
				continue
			}
			seen[name] = true
			v.names = append(v.names, name)
			v.elems = append(v.elems, genValue(r, depth+1, allowBig))
		}
		return v
	}
}

// spelling picks how a value is written.
type spelling struct {
	r        *rand.Rand
	vary     bool // random whitespace, escapes, number forms and member order
	noEscape bool
}

func (s spelling) ws(b *bytes.Buffer) {
	if !s.vary {
		return
	}
	for n := s.r.IntN(3); n > 0; n-- {
		b.WriteByte(" \t\n\r"[s.r.IntN(4)])
	}
}

func (s spelling) str(b *bytes.Buffer, str string) {
	b.WriteByte('"')
	for _, c := range str {
		esc := c < 0x20 || c == '"' || c == '\\'
		if s.vary && !s.noEscape && s.r.IntN(4) == 0 {
			esc = true
		}
		if !esc {
			b.WriteRune(c)
			continue
		}
		switch {
		case c == '"' || c == '\\':
			if s.vary && s.r.IntN(2) == 0 {
				fmt.Fprintf(b, "\\u%04X", c)
			} else {
				b.WriteByte('\\')
				b.WriteRune(c)
			}
		case c == '/' && s.r.IntN(2) == 0:
			b.WriteString(`\/`)
		case c == '\n' && s.r.IntN(2) == 0:
			b.WriteString(`\n`)
		case c >= 0x10000:
			hi, lo := 0xD800+(c-0x10000)>>10, 0xDC00+(c-0x10000)&0x3FF
			fmt.Fprintf(b, "\\u%04x\\u%04X", hi, lo)
		default:
			fmt.Fprintf(b, "\\u%04x", c)
		}
	}
	b.WriteByte('"')
}

func (s spelling) number(b *bytes.Buffer, v jv) {
	if !v.isFloat {
		n, err := strconv.Atoi(v.num)
		if s.vary && err == nil && n < 1<<53 && n > -1<<53 && s.r.IntN(3) == 0 {
			// Spell a small integer as a fraction or with an exponent.
			switch s.r.IntN(3) {
			case 0:
				fmt.Fprintf(b, "%d.0", n)
			case 1:
				fmt.Fprintf(b, "%dE0", n)
			default:
				fmt.Fprintf(b, "%d.000e+00", n)
			}
			return
		}
		b.WriteString(v.num)
		return
	}
	if !s.vary {
		b.WriteString(strconv.FormatFloat(v.f, 'g', -1, 64))
		return
	}
	switch s.r.IntN(4) {
	case 0:
		b.WriteString(strconv.FormatFloat(v.f, 'E', -1, 64))
	case 1:
		b.WriteString(strconv.FormatFloat(v.f, 'e', 20, 64)) // more digits than needed, same double
	case 2:
		lit := strconv.FormatFloat(v.f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(lit, "e")
		if !strings.Contains(mant, ".") {
			mant += ".0"
		}
		b.WriteString(mant + "00e" + exp)
	default:
		b.WriteString(strconv.FormatFloat(v.f, 'g', -1, 64))
	}
}

func (s spelling) write(b *bytes.Buffer, v jv) {
	s.ws(b)
	switch v.kind {
	case kNull:
		b.WriteString("null")
	case kTrue:
		b.WriteString("true")
	case kNumber:
		s.number(b, v)
	case kString:
		s.str(b, v.s)
	case kArray:
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			s.write(b, e)
		}
		s.ws(b)
		b.WriteByte(']')
	case kObject:
		order := make([]int, len(v.names))
		for i := range order {
			order[i] = i
		}
		if s.vary {
			s.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		b.WriteByte('{')
		for i, j := range order {
			if i > 0 {
				b.WriteByte(',')
			}
			s.ws(b)
			s.str(b, v.names[j])
			s.ws(b)
			b.WriteByte(':')
			s.write(b, v.elems[j])
		}
		s.ws(b)
		b.WriteByte('}')
	}
	s.ws(b)
}

func spell(v jv, r *rand.Rand, vary bool) []byte {
	var b bytes.Buffer
	spelling{r: r, vary: vary}.write(&b, v)
	return b.Bytes()
}

func TestPropertyIdempotentValueInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		v := genValue(r, 0, true)
		base := spell(v, r, false)
		want, err := Canonicalize(base)
		if err != nil {
			t.Fatalf("Canonicalize(%s): %v", base, err)
		}
		again, err := Canonicalize(want)
		if err != nil || !bytes.Equal(again, want) {
			t.Fatalf("not idempotent:\n%s\n%s\n%v", want, again, err)
		}
		assertSameValue(t, base, want)
		for j := 0; j < 4; j++ {
			variant := spell(v, r, true)
			got, err := Canonicalize(variant)
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", variant, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("variant changed the canonical form:\nbase    %s\nvariant %s\nwant    %s\ngot     %s", base, variant, want, got)
			}
		}
	}
}

// TestCrossCheckJCS compares nested-object output with an independent RFC
// 8785 implementation on documents where both must agree: no integer
// literal beyond 2^53 (which we keep as written) and no top-level schema.
func TestCrossCheckJCS(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		v := jv{kind: kArray, elems: []jv{genValue(r, 0, false), genValue(r, 0, false)}}
		in := spell(v, r, true)
		ours, err := Canonicalize(in)
		if err != nil {
			t.Fatalf("Canonicalize(%s): %v", in, err)
		}
		theirs, err := jcs.Transform(in)
		if err != nil {
			t.Fatalf("jcs.Transform(%s): %v", in, err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Fatalf("differs from jcs:\nin     %s\nours   %s\ntheirs %s", in, ours, theirs)
		}
	}
}

// TestRFC8785Numbers checks the number serialization table of RFC 8785
// appendix B: IEEE 754 bit patterns and their expected text.
func TestRFC8785Numbers(t *testing.T) {
	cases := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, c := range cases {
		f := math.Float64frombits(c.bits)
		for _, lit := range []string{strconv.FormatFloat(f, 'e', -1, 64), strconv.FormatFloat(f, 'E', 25, 64)} {
			got, err := Canonicalize([]byte(lit))
			if err != nil {
				t.Fatalf("%s: %v", lit, err)
			}
			if string(got) != c.want {
				t.Errorf("%016x via %s: got %s, want %s", c.bits, lit, got, c.want)
			}
		}
	}
}

func TestUTF16Order(t *testing.T) {
	keys := []string{"\ue000", "\U0001F600", "\ufffd", "\U00010000", "a", "é", ""}
	// UTF-16 code unit order: "", "a", "é", U+10000 and U+1F600 (surrogates
	// D800..), then U+E000 and U+FFFD.
	want := []string{"", "a", "é", "\U00010000", "\U0001F600", "\ue000", "\ufffd"}
	var b bytes.Buffer
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:%d", k, i)
	}
	b.WriteString("}")
	out, err := Canonicalize(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	rest := out[1:]
	for len(rest) > 1 {
		end := bytes.IndexByte(rest[1:], '"') + 1
		got = append(got, string(rest[1:end]))
		next := bytes.IndexAny(rest, ",}")
		rest = rest[next+1:]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("order %q, want %q (out %s)", got, want, out)
	}
	if compareUTF16([]byte("\ue000"), []byte("\U0001F600")) <= 0 {
		t.Error("U+E000 must sort after U+1F600 in UTF-16 order")
	}
	if !utf8.ValidString(string(out)) {
		t.Error("invalid UTF-8 output")
	}
}

func TestSchemaOrderInvariantUnderPermutation(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	members := []string{`"model":"m"`, `"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]`, `"tools":[]`,
		`"temperature":0.2`, `"stream":true`, `"user":"u"`, `"metadata":{"b":1,"a":2}`, `"seed":7`, `"prompt_cache_key":"g"`}
	var want []byte
	for i := 0; i < 50; i++ {
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		in := "{" + strings.Join(members, ",") + "}"
		got, err := Canonicalize([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = got
			const prefix = `{"model":"m","tools":[],"messages":`
			if !bytes.HasPrefix(got, []byte(prefix)) {
				t.Fatalf("chat body does not start with the prompt: %s", got)
			}
			if !bytes.HasSuffix(got, []byte(`"metadata":{"a":2,"b":1},"prompt_cache_key":"g","stream":true,"user":"u"}`)) {
				t.Fatalf("volatile members not last: %s", got)
			}
		} else if !bytes.Equal(got, want) {
			t.Fatalf("permutation changed output:\n%s\n%s", want, got)
		}
	}
}

func TestUTF8LenMatchesStdlib(t *testing.T) {
	var buf [4]byte
	for c0 := 0x80; c0 < 0x100; c0++ {
		for c1 := 0; c1 < 0x100; c1++ {
			for _, tail := range [][]byte{nil, {0x80}, {0xBF, 0x80}, {0x41}} {
				s := append(append(buf[:0], byte(c0), byte(c1)), tail...)
				r, size := utf8.DecodeRune(s)
				want := size
				if r == utf8.RuneError && size <= 1 {
					want = 0
				}
				if got := utf8Len(s); got != want {
					t.Fatalf("utf8Len(% x) = %d, want %d", s, got, want)
				}
			}
		}
	}
}
