package normalize

import (
	"strings"
	"testing"
)

// nativeText returns the native routing text of a body, cut to 8N+1 bytes
// as the key reads it.
func nativeText(t *testing.T, body string, mode Mode) string {
	t.Helper()
	canon, _, err := AppendCanonical(nil, []byte(body), Options{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	text, err := appendNativeText(nil, canon, spillCap(DefaultPrefixLength)+1)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

func TestNativeRoutingText(t *testing.T) {
	for _, c := range []struct {
		name string
		mode Mode
		body string
		want string
	}{
		{"chat body in native mode", ModeNative,
			`{"temperature":0.5,"user":"a","model":"m","messages":[{"role":"user","content":"hi"}],"frequency_penalty":1,"tools":[],"stream":true}`,
			`{"messages":[{"content":"hi","role":"user"}],"model":"m","tools":[]}`},
		{"completion body in native mode", ModeNative,
			`{"prompt":"p","max_tokens":3,"suffix":"s","model":"m","echo":true,"metadata":{"a":1}}`,
			`{"model":"m","prompt":"p","suffix":"s"}`},
		{"native body", ModeAuto,
			`{"parameters":{"temperature":0.7},"inputs":"What is a KV cache?","stream":false,"request_id":"r1"}`,
			`{"inputs":"What is a KV cache?"}`},
		{"unknown schema", ModeAuto,
			`{"zeta":1,"user":"u","alpha":{"x":[1]},"stream":true,"model":"m","service_tier":"auto"}`,
			`{"alpha":{"x":[1]},"model":"m","zeta":1}`},
		{"unknown schema, volatile members only", ModeAuto, `{"user":"u","stream":true}`, `{}`},
		{"empty object", ModeAuto, `{}`, `{}`},
		{"array", ModeNative, `[{"b":1,"a":2},"x"]`, `[{"a":2,"b":1},"x"]`},
		{"string", ModeNative, `"just text"`, `"just text"`},
		{"escaped member names", ModeAuto, `{"a\"b":1,"u\u0073er":2,"\\":3}`, `{"\\":3,"a\"b":1}`},
	} {
		if got := nativeText(t, c.body, c.mode); got != c.want {
			t.Errorf("%s: routing text\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// TestNativeKeyIgnoresSamplingAndMetadata is the contract: in native mode
// (and on /invocations) sampling parameters and volatile metadata never
// move a key, for known schemas and unknown ones.
func TestNativeKeyIgnoresSamplingAndMetadata(t *testing.T) {
	groups := [][]string{
		{
			`{"model":"m","messages":[{"role":"system","content":"doc"},{"role":"user","content":"q"}],"temperature":0.5,"user":"a"}`,
			`{"model":"m","messages":[{"role":"system","content":"doc"},{"role":"user","content":"q"}],"temperature":0.9,"user":"b","stream":true}`,
			`{"stream_options":{"include_usage":true},"top_p":0.1,"messages":[{"role":"system","content":"doc"},{"role":"user","content":"q"}],"model":"m","seed":7,"metadata":{"ts":"2026-05-01"}}`,
		},
		{
			`{"inputs":"Summarize: ...","parameters":{"temperature":0.5,"max_new_tokens":10},"user":"a"}`,
			`{"inputs":"Summarize: ...","parameters":{"temperature":0.9,"top_k":5},"stream":true}`,
			`{"inputs":"Summarize: ..."}`,
		},
		{
			`{"model":"m","prompt":"Once","temperature":0,"user":"x"}`,
			`{"model":"m","prompt":"Once","temperature":1,"logprobs":3,"stream":true,"request_id":"r"}`,
		},
		{
			`{"query":"stable","user":"a","stream":false}`,
			`{"query":"stable","user":"b","stream":true,"metadata":{"k":"v"},"priority":3}`,
		},
	}
	var keys []uint64
	for gi, g := range groups {
		var key uint64
		for i, body := range g {
			_, ri, err := Normalize(nil, []byte(body), Options{Mode: ModeNative}, KeyOptions{Mode: ModeNative})
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				key = ri.Key
				keys = append(keys, key)
			} else if ri.Key != key {
				t.Errorf("group %d: body %d has key %s, body 0 %s", gi, i, ri.KeyHex(), FormatKey(key))
			}
		}
	}
	// And what defines the prompt still does.
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"system","content":"other doc"},{"role":"user","content":"q"}],"temperature":0.5,"user":"a"}`,
		`{"model":"m2","messages":[{"role":"system","content":"doc"},{"role":"user","content":"q"}],"temperature":0.5,"user":"a"}`,
		`{"model":"m","messages":[{"role":"system","content":"doc"},{"role":"user","content":"q"}],"tools":[{"type":"function"}]}`,
	} {
		_, ri, err := Normalize(nil, []byte(body), Options{Mode: ModeNative}, KeyOptions{Mode: ModeNative})
		if err != nil {
			t.Fatal(err)
		}
		if ri.Key == keys[0] {
			t.Errorf("prompt change kept the key: %s", body)
		}
	}
}

func TestNativeTextCutAtLimit(t *testing.T) {
	body := `{"inputs":"` + strings.Repeat("x", 100) + `","user":"u"}`
	got, err := appendNativeText([]byte("head"), []byte(body), 20)
	if err != nil {
		t.Fatal(err)
	}
	if want := "head" + `{"inputs":"xxxxxxxxx`; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// BenchmarkNormalizeNative is BenchmarkNormalize in native mode, where the
// routing text is the canonical body with its routing members only.
func BenchmarkNormalizeNative(b *testing.B) {
	body := chatBodyOfSize(32 << 10)
	dst := make([]byte, 0, 2*len(body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		var err error
		if dst, _, err = Normalize(dst[:0], body, Options{Mode: ModeNative}, KeyOptions{Mode: ModeNative}); err != nil {
			b.Fatal(err)
		}
	}
}
