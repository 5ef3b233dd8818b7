package normalize

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// asciiOnly maps every character from U+0080 up in v's strings and member
// names to a letter, so that the document is ASCII however it is spelled.
// A member name that folds onto an earlier one gets x's appended, so that
// the document stays free of duplicate names.
func asciiOnly(v jv) jv {
	fold := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 0x80 {
				return 'a' + r%26
			}
			return r
		}, s)
	}
	v.s = fold(v.s)
	if v.names != nil {
		names := make([]string, len(v.names))
		seen := make(map[string]bool, len(v.names))
		for i, n := range v.names {
			names[i] = fold(n)
			for seen[names[i]] {
				names[i] += "x"
			}
			seen[names[i]] = true
		}
		v.names = names
	}
	if v.elems != nil {
		elems := make([]jv, len(v.elems))
		for i, e := range v.elems {
			elems[i] = asciiOnly(e)
		}
		v.elems = elems
	}
	return v
}

// TestNonASCIIFlag: the parse says a document holds a character from
// U+0080 up exactly when its canonical form has a byte from 0x80 up (RFC
// 8785 writes every such character raw), on documents that hold some and
// on the same documents folded to ASCII, spelled with escapes or not.
func TestNonASCIIFlag(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 3))
	for i := 0; i < 3000; i++ {
		v := genRequest(r)
		if i%2 == 0 {
			v = asciiOnly(v)
		}
		body := spell(v, r, r.IntN(2) == 0)
		p := newParser()
		if err := p.parse(body, Options{}.withDefaults()); err != nil {
			t.Fatalf("parse %q: %v", body, err)
		}
		canon := p.emit(nil, 0)
		want := strings.ContainsFunc(string(canon), func(r rune) bool { return r >= 0x80 })
		if p.nonASCII != want {
			t.Fatalf("nonASCII %v, want %v for %q", p.nonASCII, want, body)
		}
	}
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"a":"plain"}`, false},
		{`{"a":"\u0041\n\u001f"}`, false},
		{`{"a":"\u00e9"}`, true},
		{`{"a":"\ud83d\ude00"}`, true},
		{`{"é":1}`, true},
		{`{"\u00e9":1}`, true},
		{`["x", "€"]`, true},
	} {
		p := newParser()
		if err := p.parse([]byte(c.body), Options{}.withDefaults()); err != nil {
			t.Fatal(err)
		}
		if p.nonASCII != c.want {
			t.Errorf("%s: nonASCII %v, want %v", c.body, p.nonASCII, c.want)
		}
	}
}

// TestKeyFromParseASCII is TestKeyFromParseMatchesRouteKey on ASCII
// documents, where the parse's key neither counts characters nor marks
// blocks: the key, spill keys, blocks and token estimate must still be
// RouteKey's.
func TestKeyFromParseASCII(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 4))
	modes := []Mode{ModeAuto, ModeChat, ModeCompletion, ModeNative, ModeResponses, ModeMessages, ModePooling}
	for i := 0; i < 3000; i++ {
		body := spell(asciiOnly(genRequest(r)), r, r.IntN(2) == 0)
		kopts := KeyOptions{Mode: modes[r.IntN(len(modes))], Blocks: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			kopts.PrefixLength = MinPrefixLength
		}
		if r.IntN(5) == 0 {
			kopts.Group = "g-1"
		}
		keyFromParse(t, body, modes[r.IntN(len(modes))], kopts)
	}
}

// FuzzKeyFromParse: on any bytes that canonicalize, the key Normalize reads
// off its parse (ASCII documents counting no characters) is RouteKey's key
// of the canonical bytes, blocks and token estimate included.
func FuzzKeyFromParse(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"a\nb"},{"role":"user","content":"q"}]}`))
	f.Add([]byte(`{"model":"m","tools":[{"x":1}],"messages":[{"role":"user","content":[{"type":"text","text":"é"},{"type":"image_url"}]},"x"]}`))
	f.Add([]byte(`{"model":"m","prompt":["a\u00e9",1,"b"],"prompt_cache_key":"k"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range []Mode{ModeAuto, ModeChat, ModeCompletion, ModeResponses, ModeMessages, ModePooling} {
			for _, blocks := range []bool{false, true} {
				keyFromParse(t, data, ModeAuto, KeyOptions{Mode: m, Blocks: blocks, PrefixLength: MinPrefixLength})
			}
		}
	})
}
