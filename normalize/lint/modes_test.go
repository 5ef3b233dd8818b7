package lint

import (
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/normalize"
)

// routedSegments lays out a body's routing text as the rules see it.
func routedSegments(t *testing.T, body string, mode normalize.Mode) *routingText {
	t.Helper()
	canon, _, err := normalize.AppendCanonical(nil, []byte(body), normalize.Options{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	ctree, _, err := parseTree(canon)
	if err != nil {
		t.Fatal(err)
	}
	rtree, _, err := parseTree([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return buildRoutingText(mode, canon, ctree, rtree)
}

// TestMessagesSegmentsSkipCacheControl: in Messages mode cache_control is
// not routing text, so a value after one sits where it sits without it.
func TestMessagesSegmentsSkipCacheControl(t *testing.T) {
	tmpl := `{"model":"m","max_tokens":5,"tools":[{CC"name":"f","description":"id 123e4567-e89b-12d3-a456-426614174000","input_schema":{"a":{CC"b":1}}}],"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`
	plain := routedSegments(t, strings.ReplaceAll(tmpl, "CC", ""), normalize.ModeMessages)
	marked := routedSegments(t, strings.ReplaceAll(tmpl, "CC", `"cache_control":{"type":"ephemeral"},`), normalize.ModeMessages)
	if plain.text != marked.text || plain.units != marked.units {
		t.Fatalf("routing texts differ: %q vs %q", plain.text, marked.text)
	}
	if len(plain.segs) != len(marked.segs) {
		t.Fatalf("segments %d vs %d", len(plain.segs), len(marked.segs))
	}
	for i := range plain.segs {
		if p, m := plain.segs[i], marked.segs[i]; p.path != m.path || p.start != m.start {
			t.Errorf("segment %d: %s at %d without cache_control, %s at %d with", i, p.path, p.start, m.path, m.start)
		}
	}
}

func TestCheckNewModes(t *testing.T) {
	bodies := [][]byte{
		[]byte(`{"model":"m","instructions":"Today is 2026-05-01. Answer briefly.","input":[{"role":"user","content":"hi"},{"role":"user","content":"q"}]}`),
		[]byte(`{"model":"m","max_tokens":9,"system":[{"type":"text","text":"Today is 2026-05-01. Answer briefly."}],"messages":[{"role":"user","content":"hi"}]}`),
		[]byte(`{"model":"m","query":"q","documents":["a"]}`),
	}
	for i, mode := range []normalize.Mode{normalize.ModeResponses, normalize.ModeMessages, normalize.ModePooling} {
		rep, err := Check(bodies[i:i+1], Options{Mode: mode})
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		injected := false
		for _, f := range rep.Findings {
			if f.RuleID == ruleSchema || f.RuleID == ruleInvalidJSON {
				t.Errorf("%v: %+v", mode, f)
			}
			injected = injected || f.RuleID == ruleDateInjection
		}
		if mode != normalize.ModePooling && !injected {
			t.Errorf("%v: no date-injection finding in %+v", mode, rep.Findings)
		}
	}
}
