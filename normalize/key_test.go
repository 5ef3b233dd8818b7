package normalize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

func chatBody(model, doc, question string, extra string) []byte {
	return fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"system","content":%q},{"role":"user","content":%q}]%s}`, model, doc, question, extra)
}

func mustKey(t *testing.T, body []byte, k KeyOptions) RouteInfo {
	t.Helper()
	_, ri, err := Normalize(nil, body, Options{}, k)
	if err != nil {
		t.Fatalf("Normalize(%s): %v", body, err)
	}
	return ri
}

func TestKeyStability(t *testing.T) {
	doc := strings.Repeat("The quarterly report says revenue grew. ", 38)[:1500]
	base := mustKey(t, chatBody("llama", doc, "What grew?", ""), KeyOptions{})
	same := map[string][]byte{
		"other question":  chatBody("llama", doc, "Who wrote it?", ""),
		"sampling params": chatBody("llama", doc, "What grew?", `,"temperature":0.1,"top_p":0.5,"seed":3,"max_tokens":9`),
		"volatile":        chatBody("llama", doc, "What grew?", `,"user":"u-77","metadata":{"ts":"2026-05-01T10:00:00Z"},"stream":true,"request_id":"abc"`),
		"spelling":        []byte(fmt.Sprintf(`{ "messages" : [ {"content":%q,"role":"system"}, {"role":"user","content":"x"} ], "model":"ll\u0061ma" }`, doc)),
	}
	for name, body := range same {
		if got := mustKey(t, body, KeyOptions{}); got.Key != base.Key {
			t.Errorf("%s changed the key: %s vs %s", name, got.KeyHex(), base.KeyHex())
		}
	}
	differ := map[string]struct {
		body []byte
		k    KeyOptions
	}{
		"model":          {chatBody("mistral", doc, "What grew?", ""), KeyOptions{}},
		"group":          {chatBody("llama", doc, "What grew?", ""), KeyOptions{Group: "tenant-b"}},
		"body group":     {chatBody("llama", doc, "What grew?", `,"prompt_cache_key":"t"`), KeyOptions{}},
		"stable prefix":  {chatBody("llama", "Another document. "+doc, "What grew?", ""), KeyOptions{}},
		"tools":          {chatBody("llama", doc, "What grew?", `,"tools":[{"type":"function"}]`), KeyOptions{}},
		"prefix changed": {chatBody("llama", "X"+doc[1:], "What grew?", ""), KeyOptions{}},
	}
	for name, c := range differ {
		if got := mustKey(t, c.body, c.k); got.Key == base.Key {
			t.Errorf("%s did not change the key", name)
		}
	}
	if base.RoutingTextLen != len("system")+2+1500 {
		t.Errorf("routing text length %d", base.RoutingTextLen)
	}
}

func TestKeyLayout(t *testing.T) {
	// The documented frame, rebuilt by hand.
	frame := func(mode byte, group, model, text string) uint64 {
		var b []byte
		b = append(b, mode)
		for _, f := range []string{group, model, text} {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
			b = append(b, f...)
		}
		return xxh3.Hash(b)
	}
	body := []byte(`{"model":"m","tools":[{"type":"function"}],"messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},{"role":"user","content":"final"}],"prompt_cache_key":"pk"}`)
	ri := mustKey(t, body, KeyOptions{})
	want := frame(1, "pk", "m", "tools\x1f[{\"type\":\"function\"}]\x1esystem\x1fS\x1euser\x1fA\nB\x1e")
	if ri.Key != want {
		t.Errorf("chat key %s, want %s", ri.KeyHex(), FormatKey(want))
	}
	ri = mustKey(t, []byte(`{"model":"m","prompt":["a",[1,2],3]}`), KeyOptions{Group: "g"})
	if want := frame(2, "g", "m", "a\x1e[1,2]\x1e3\x1e"); ri.Key != want {
		t.Errorf("completion key %s, want %s", ri.KeyHex(), FormatKey(want))
	}
	ri = mustKey(t, []byte(`{"model":"m","prompt":"hello"}`), KeyOptions{})
	if want := frame(2, "", "m", "hello"); ri.Key != want {
		t.Errorf("completion string key %s, want %s", ri.KeyHex(), FormatKey(want))
	}
	// Native: the canonical body with its routing members only; a native
	// body's parameters are generation parameters.
	ri = mustKey(t, []byte(`{"inputs":"hi","parameters":{"a":1}}`), KeyOptions{})
	if want := frame(3, "", "", `{"inputs":"hi"}`); ri.Key != want || ri.Mode != ModeNative {
		t.Errorf("native key %s, want %s", ri.KeyHex(), FormatKey(want))
	}
	ri = mustKey(t, []byte(`[1,{"b":2}]`), KeyOptions{Mode: ModeNative})
	if want := frame(3, "", "", `[1,{"b":2}]`); ri.Key != want {
		t.Errorf("native array key %s, want %s", ri.KeyHex(), FormatKey(want))
	}
	if got := FormatKey(0xab); got != "00000000000000ab" {
		t.Errorf("FormatKey = %s", got)
	}
}

func TestSpillKeys(t *testing.T) {
	const n = 1024
	for _, c := range []struct {
		chars, spills int
	}{{100, 0}, {1024, 0}, {1025, 1}, {2048, 1}, {2049, 2}, {4097, 3}, {20000, 3}} {
		// Characters of 1 to 4 bytes, so bytes and characters differ.
		text := strings.Repeat("aé€😀", c.chars/4+1)
		text = string([]rune(text)[:c.chars])
		body := fmt.Appendf(nil, `{"model":"m","prompt":%q}`, text)
		ri := mustKey(t, body, KeyOptions{PrefixLength: n})
		if len(ri.SpillKeys) != c.spills {
			t.Errorf("%d chars: %d spill keys, want %d", c.chars, len(ri.SpillKeys), c.spills)
		}
		if want := min(c.chars, n); ri.RoutingTextLen != want {
			t.Errorf("%d chars: routing text length %d, want %d", c.chars, ri.RoutingTextLen, want)
		}
		seen := map[uint64]bool{ri.Key: true}
		for _, k := range ri.SpillKeys {
			if seen[k] {
				t.Errorf("%d chars: repeated spill key", c.chars)
			}
			seen[k] = true
		}
		// The key only sees the first N characters.
		longer := fmt.Appendf(nil, `{"model":"m","prompt":%q}`, text+"tail")
		if c.chars >= n && mustKey(t, longer, KeyOptions{PrefixLength: n}).Key != ri.Key {
			t.Errorf("%d chars: text beyond N changed the key", c.chars)
		}
	}
}

func TestKeyOptionsErrors(t *testing.T) {
	body := []byte(`{"model":"m","prompt":"p"}`)
	for _, k := range []KeyOptions{{PrefixLength: 1023}, {PrefixLength: 65537}, {PrefixLength: -1}, {Group: strings.Repeat("g", 65)}, {Group: "tab\there"}} {
		_, _, err := Normalize(nil, body, Options{}, k)
		if !errors.Is(err, ErrBadOption) {
			t.Errorf("%+v: error %v, want ErrBadOption", k, err)
		}
		if code := ErrorCode(err); code != CodePrefixLength && code != CodeInvalidGroup {
			t.Errorf("%+v: code %q", k, code)
		}
	}
	for _, n := range []int{1024, 65536, 0} {
		if _, _, err := Normalize(nil, body, Options{}, KeyOptions{PrefixLength: n}); err != nil {
			t.Errorf("prefix length %d: %v", n, err)
		}
	}
}

func TestRouteKeyMalformedNoPanic(t *testing.T) {
	for _, s := range []string{``, `{`, `{"messages":[`, `{"messages":[{"role":"u`, `{"model":"\u00`, `{"messages":[{"content":"\ud800"},1]}`, `{"prompt":[`, `[`, `"`, `{"a"`, `{"a":}`} {
		for _, m := range []Mode{ModeAuto, ModeChat, ModeCompletion, ModeNative} {
			_, _ = RouteKey([]byte(s), KeyOptions{Mode: m})
		}
	}
}

func TestLimits(t *testing.T) {
	cases := []struct {
		name string
		in   string
		opt  Options
		is   error
		code string
	}{
		{"body", `[1,2,3]`, Options{MaxBodyBytes: 5}, ErrTooLarge, CodeSizeLimit},
		{"depth", `[[[1]]]`, Options{MaxDepth: 2}, ErrTooDeep, CodeDepthLimit},
		{"depth object", `{"a":{"b":{}}}`, Options{MaxDepth: 2}, ErrTooDeep, CodeDepthLimit},
		{"string", `["abcdef"]`, Options{MaxStringBytes: 5}, ErrTooLong, CodeStringLimit},
		{"number", `[123456]`, Options{MaxStringBytes: 5}, ErrTooLong, CodeStringLimit},
		{"syntax", `[1,]`, Options{}, ErrInvalid, CodeTrailingComma},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := AppendCanonical(nil, []byte(c.in), c.opt)
			if !errors.Is(err, c.is) || ErrorCode(err) != c.code {
				t.Errorf("error %v (code %q), want %v / %s", err, ErrorCode(err), c.is, c.code)
			}
			for _, other := range []error{ErrTooLarge, ErrTooDeep, ErrTooLong, ErrInvalid} {
				if other != c.is && errors.Is(err, other) {
					t.Errorf("error also matches %v", other)
				}
			}
			var se *SyntaxError
			if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), fmt.Sprintf("offset %d: ", se.Offset)) {
				t.Errorf("error %q lacks its offset", err)
			}
		})
	}
	// At the limits exactly: accepted.
	if _, _, err := AppendCanonical(nil, []byte(`[1,2]`), Options{MaxBodyBytes: 5}); err != nil {
		t.Error(err)
	}
	if _, _, err := AppendCanonical(nil, []byte(`["abcde"]`), Options{MaxStringBytes: 5}); err != nil {
		t.Error(err)
	}
}

func TestModeNames(t *testing.T) {
	for _, m := range []Mode{ModeAuto, ModeChat, ModeCompletion, ModeNative} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("grpc"); err == nil {
		t.Error("ParseMode accepted an unknown mode")
	}
}

func TestAppendKeepsPrefixAndFailsClean(t *testing.T) {
	dst := []byte("prefix:")
	out, _, err := AppendCanonical(dst, []byte(` { "b":1, "a":2 } `), Options{})
	if err != nil || string(out) != `prefix:{"a":2,"b":1}` {
		t.Errorf("got %q, %v", out, err)
	}
	out, _, err = AppendCanonical(dst, []byte(`{"a":1,"a":2}`), Options{})
	if err == nil || string(out) != "prefix:" {
		t.Errorf("on error got %q, %v", out, err)
	}
}
