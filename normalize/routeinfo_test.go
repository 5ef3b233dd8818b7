package normalize

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// genRequest generates a chat- or completion-shaped body: the members the
// key reads take every kind of value, the texts are long enough to pass
// the windows and the budget of small prefix lengths, and the rest is
// random.
func genRequest(r *rand.Rand) jv {
	str := func() jv {
		n := r.IntN(40)
		if r.IntN(6) == 0 {
			n = 200 + r.IntN(3000)
		}
		return jv{kind: kString, s: randString(r, n)}
	}
	anyv := func() jv {
		if r.IntN(2) == 0 {
			return str()
		}
		return genValue(r, 1, false)
	}
	obj := func(names []string, vals []jv) jv { return jv{kind: kObject, names: names, elems: vals} }
	part := func() jv {
		switch r.IntN(5) {
		case 0:
			return obj([]string{"type", "text"}, []jv{{kind: kString, s: "text"}, str()})
		case 1:
			return obj([]string{"type", "text"}, []jv{anyv(), anyv()})
		case 2:
			return obj([]string{"type", "image_url"}, []jv{{kind: kString, s: "image_url"}, obj([]string{"url"}, []jv{str()})})
		case 3:
			return str()
		}
		return genValue(r, 2, false)
	}
	content := func() jv {
		switch r.IntN(4) {
		case 0, 1:
			return str()
		case 2:
			v := jv{kind: kArray}
			for n := r.IntN(4); n > 0; n-- {
				v.elems = append(v.elems, part())
			}
			return v
		}
		return genValue(r, 1, false)
	}
	message := func() jv {
		if r.IntN(12) == 0 {
			return genValue(r, 1, false)
		}
		var names []string
		var vals []jv
		if r.IntN(8) > 0 {
			names, vals = append(names, "role"), append(vals, jv{kind: kString, s: []string{"system", "user", "assistant", "tool"}[r.IntN(4)]})
		} else if r.IntN(2) == 0 {
			names, vals = append(names, "role"), append(vals, anyv())
		}
		if r.IntN(8) > 0 {
			names, vals = append(names, "content"), append(vals, content())
		}
		if r.IntN(4) == 0 {
			names, vals = append(names, "name"), append(vals, str())
		}
		return obj(names, vals)
	}
	var names []string
	var vals []jv
	add := func(name string, v jv) {
		if !slices.Contains(names, name) {
			names, vals = append(names, name), append(vals, v)
		}
	}
	if r.IntN(3) == 0 {
		genModeMembers(r, add, message, str, anyv)
	} else if r.IntN(2) == 0 {
		msgs := jv{kind: kArray}
		for n := r.IntN(8); n > 0; n-- {
			msgs.elems = append(msgs.elems, message())
		}
		if r.IntN(10) == 0 {
			msgs = anyv()
		}
		add("messages", msgs)
		if r.IntN(3) == 0 {
			add("tools", genValue(r, 0, false))
		}
	} else {
		prompt := str()
		switch r.IntN(4) {
		case 0:
			prompt = jv{kind: kArray}
			for n := r.IntN(6); n > 0; n-- {
				prompt.elems = append(prompt.elems, anyv())
			}
		case 1:
			prompt = anyv()
		}
		add("prompt", prompt)
	}
	if r.IntN(4) > 0 {
		add("model", anyv())
	}
	if r.IntN(3) == 0 {
		add("prompt_cache_key", anyv())
	}
	for n := r.IntN(3); n > 0; n-- {
		add(randString(r, 1+r.IntN(6)), genValue(r, 1, false))
	}
	return obj(names, vals)
}

// genModeMembers adds the members of a Responses, Messages or pooling
// body, now and then of the wrong type.
func genModeMembers(r *rand.Rand, add func(string, jv), message, str, anyv func() jv) {
	obj := func(names []string, vals []jv) jv { return jv{kind: kObject, names: names, elems: vals} }
	cc := func(v jv) jv {
		if v.kind == kObject && r.IntN(3) == 0 {
			v.names, v.elems = append(v.names, "cache_control"), append(v.elems, obj([]string{"type"}, []jv{{kind: kString, s: "ephemeral"}}))
		}
		return v
	}
	list := func(elem func() jv) jv {
		v := jv{kind: kArray}
		for n := r.IntN(6); n > 0; n-- {
			v.elems = append(v.elems, cc(elem()))
		}
		if r.IntN(12) == 0 {
			return anyv()
		}
		return v
	}
	item := func() jv {
		if r.IntN(4) == 0 {
			return obj([]string{"type", "call_id", "output"}, []jv{{kind: kString, s: "function_call_output"}, str(), str()})
		}
		m := message()
		if m.kind == kObject && len(m.names) > 1 && m.elems[1].kind == kArray {
			for i := range m.elems[1].elems {
				m.elems[1].elems[i] = cc(m.elems[1].elems[i])
			}
		}
		return m
	}
	switch r.IntN(3) {
	case 0:
		if r.IntN(4) == 0 {
			add("input", str())
		} else {
			add("input", list(item))
		}
		if r.IntN(2) == 0 {
			add("instructions", str())
		}
		if r.IntN(3) == 0 {
			add("previous_response_id", str())
		}
		if r.IntN(3) == 0 {
			add("tools", list(func() jv { return genValue(r, 1, false) }))
		}
	case 1:
		add("messages", list(item))
		add("max_tokens", jv{kind: kNumber, num: "16"})
		if r.IntN(4) > 0 {
			add("system", list(func() jv { return obj([]string{"type", "text"}, []jv{{kind: kString, s: "text"}, str()}) }))
		}
		if r.IntN(3) == 0 {
			add("tools", list(func() jv { return genValue(r, 1, false) }))
		}
	default:
		for _, name := range poolingRouting {
			if r.IntN(3) == 0 {
				add(name, list(anyv))
			} else if r.IntN(3) == 0 {
				add(name, str())
			}
		}
	}
}

// keyFromParse compares Normalize's RouteInfo, read off the parse, with
// RouteKey's scan of the canonical bytes.
func keyFromParse(t *testing.T, body []byte, mode Mode, kopts KeyOptions) {
	t.Helper()
	out, ri, err := Normalize(nil, body, Options{Mode: mode}, kopts)
	canon, cmode, cerr := AppendCanonical(nil, body, Options{Mode: mode})
	if (err == nil) != (cerr == nil) && cerr != nil {
		t.Fatalf("Normalize %v, AppendCanonical %v for %q", err, cerr, body)
	}
	if cerr != nil {
		return
	}
	if kopts.Mode == ModeAuto {
		kopts.Mode = cmode
		if cmode == ModeAuto {
			kopts.Mode = ModeNative
		}
	}
	want, werr := RouteKey(canon, kopts)
	if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("mode %v %+v: Normalize error %v, RouteKey error %v for %q", mode, kopts, err, werr, body)
	}
	if err != nil {
		return
	}
	if string(out) != string(canon) {
		t.Fatalf("canonical bytes differ for %q", body)
	}
	if !reflect.DeepEqual(ri, want) {
		t.Fatalf("mode %v %+v: from the parse %+v, from the canonical bytes %+v, body %q", mode, kopts, ri, want, body)
	}
}

// TestKeyFromParseMatchesRouteKey: over generated requests in every mode,
// with and without blocks, group and a small window, the key Normalize
// reads off its parse is RouteKey's key of the canonical bytes, errors
// included.
func TestKeyFromParseMatchesRouteKey(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 1))
	modes := []Mode{ModeAuto, ModeChat, ModeCompletion, ModeNative, ModeResponses, ModeMessages, ModePooling}
	for i := 0; i < 3000; i++ {
		body := spell(genRequest(r), r, r.IntN(2) == 0)
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

// TestKeyFromParseCorpus runs the same comparison over the checked-in
// bodies.
func TestKeyFromParseCorpus(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "valid", "*.json"))
	if len(files) == 0 {
		t.Fatal("no bodies under testdata/valid")
	}
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []Mode{ModeAuto, ModeChat, ModeCompletion, ModeResponses, ModeMessages, ModePooling} {
			for _, blocks := range []bool{false, true} {
				keyFromParse(t, body, ModeAuto, KeyOptions{Mode: m, Blocks: blocks})
				keyFromParse(t, body, m, KeyOptions{PrefixLength: MinPrefixLength, Blocks: blocks})
			}
		}
	}
}

// TestNormalizeScopedMatchesSplice: a scope's salt and group applied in the
// one pass give the bytes and key of normalizing the body with that
// cache_salt member already in it and that group.
func TestNormalizeScopedMatchesSplice(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 2))
	modes := []Mode{ModeAuto, ModeChat, ModeCompletion, ModeNative, ModeResponses, ModeMessages, ModePooling}
	for i := 0; i < 2000; i++ {
		v := genRequest(r)
		if r.IntN(3) == 0 {
			v.names, v.elems = append(v.names, "cache_salt"), append(v.elems, genValue(r, 1, false))
		}
		if r.IntN(2) == 0 {
			v.names, v.elems = append(v.names, "metadata"), append(v.elems, jv{kind: kString, s: "x"})
		}
		salt := randString(r, r.IntN(40))
		spliced := v
		spliced.names, spliced.elems = nil, nil
		for j, n := range v.names {
			if n != "cache_salt" {
				spliced.names, spliced.elems = append(spliced.names, n), append(spliced.elems, v.elems[j])
			}
		}
		spliced.names, spliced.elems = append(spliced.names, "cache_salt"), append(spliced.elems, jv{kind: kString, s: salt})
		mode := modes[r.IntN(len(modes))]
		kopts := KeyOptions{Mode: modes[r.IntN(len(modes))], Blocks: r.IntN(2) == 0}
		var gotGroup string
		out, ri, err := NormalizeScoped(nil, spell(v, r, true), Options{Mode: mode}, kopts, func(group, old string) (string, string) {
			gotGroup = group
			return "scoped-" + FormatKey(uint64(len(group))), salt
		})
		want := kopts
		want.Group = "scoped-" + FormatKey(uint64(len(gotGroup)))
		wout, wri, werr := Normalize(nil, spell(spliced, r, false), Options{Mode: mode}, want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("scoped error %v, spliced error %v", err, werr)
		}
		if err != nil {
			continue
		}
		if string(out) != string(wout) || !reflect.DeepEqual(ri, wri) {
			t.Fatalf("scoped %s %+v\nspliced %s %+v", out, ri, wout, wri)
		}
	}
	if _, _, err := NormalizeScoped(nil, []byte(`[1]`), Options{}, KeyOptions{}, func(g, s string) (string, string) { return g, s }); err == nil {
		t.Fatal("a scoped array was accepted")
	}
}
