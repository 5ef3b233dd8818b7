package normalize

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestModeNamesRoundTrip(t *testing.T) {
	for i, name := range ModeNames() {
		m, err := ParseMode(name)
		if err != nil || m != Mode(i) || m.String() != name {
			t.Errorf("ParseMode(%q) = %v, %v", name, m, err)
		}
	}
	for _, m := range []Mode{ModeResponses, ModeMessages, ModePooling} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("%v does not round-trip: %v %v", m, got, err)
		}
	}
	if _, err := ParseMode("anthropic"); err == nil || !strings.Contains(err.Error(), "responses, messages or pooling") {
		t.Errorf("unknown mode error %v does not list the modes", err)
	}
}

// TestModeDetection: ModeAuto's rule, on the parse (AppendCanonical) and on
// the canonical bytes (RouteKey) alike.
func TestModeDetection(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"},{"role":"user","content":"q"}]`
	for _, c := range []struct {
		body string
		want Mode
	}{
		{`{"model":"m",` + msgs + `}`, ModeChat},
		{`{"model":"m","max_tokens":5,` + msgs + `}`, ModeChat},
		{`{"model":"m","system":"s",` + msgs + `}`, ModeChat},
		{`{"model":"m","stop_sequences":["x"],` + msgs + `}`, ModeChat},
		{`{"model":"m","max_tokens":5,"system":"s",` + msgs + `}`, ModeMessages},
		{`{"model":"m","max_tokens":5,"system":null,` + msgs + `}`, ModeMessages},
		{`{"model":"m","max_tokens":5,"stop_sequences":["x"],` + msgs + `}`, ModeMessages},
		{`{"model":"m","input":"hi"}`, ModeResponses},
		{`{"model":"m","input":[{"role":"user","content":"hi"}],"previous_response_id":"r"}`, ModeResponses},
		{`{"model":"m","input":["a","b"]}`, ModePooling},
		{`{"model":"m","input":[1,2,3]}`, ModePooling},
		{`{"model":"m","input":[[1,2],[3]]}`, ModePooling},
		{`{"model":"m","input":[]}`, ModePooling},
		{`{"model":"m","input":[{"role":"user","content":"x"},"y"]}`, ModePooling},
		{`{"model":"m","input":7}`, ModePooling},
		{`{"model":"m","query":"q","documents":["a","b"]}`, ModePooling},
		{`{"model":"m","text_1":"a","text_2":["b"]}`, ModePooling},
		{`{"model":"m","query":"q"}`, ModeAuto},
		{`{"model":"m","documents":["d"]}`, ModeAuto},
		{`{"model":"m","text_1":"a"}`, ModeAuto},
		{`{"model":"m","prompt":"p","input":"x"}`, ModeCompletion},
		{`{"inputs":"x","input":"y"}`, ModeNative},
		{`{"model":"m","input":"x",` + msgs + `}`, ModeChat},
		{`{"model":"m"}`, ModeAuto},
	} {
		canon, mode, err := AppendCanonical(nil, []byte(c.body), Options{})
		if err != nil || mode != c.want {
			t.Errorf("%s: detected %v (%v), want %v", c.body, mode, err, c.want)
			continue
		}
		want := c.want
		if want == ModeAuto {
			want = ModeNative
		}
		ri, err := RouteKey(canon, KeyOptions{})
		if err != nil || ri.Mode != want {
			t.Errorf("%s: RouteKey detected %v (%v), want %v", c.body, ri.Mode, err, want)
		}
	}
}

func TestModeCanonicalOrder(t *testing.T) {
	for _, c := range []struct {
		mode       Mode
		body, want string
	}{
		{ModeResponses,
			`{"stream":true,"background":true,"temperature":0.5,"previous_response_id":"r","input":"q","tools":[],"instructions":"i","model":"m","metadata":{"b":1,"a":2},"store":false}`,
			`{"model":"m","instructions":"i","tools":[],"input":"q","previous_response_id":"r","temperature":0.5,"background":true,"metadata":{"a":2,"b":1},"store":false,"stream":true}`},
		{ModeMessages,
			`{"cache_control":{"type":"ephemeral"},"stream":true,"max_tokens":9,"messages":[],"tools":[],"system":"s","model":"m","metadata":{"user_id":"u"},"stop_sequences":["x"]}`,
			`{"model":"m","system":"s","tools":[],"messages":[],"max_tokens":9,"stop_sequences":["x"],"cache_control":{"type":"ephemeral"},"metadata":{"user_id":"u"},"stream":true}`},
		{ModePooling,
			`{"user":"u","text_2":"b","documents":["d"],"messages":[],"input":"x","text_1":"a","query":"q","model":"m","top_n":2}`,
			`{"model":"m","query":"q","text_1":"a","input":"x","messages":[],"documents":["d"],"text_2":"b","top_n":2,"user":"u"}`},
		// "background" is volatile only in a Responses body.
		{ModeChat, `{"background":true,"messages":[],"model":"m","zz":1}`, `{"model":"m","messages":[],"background":true,"zz":1}`},
	} {
		out, _, err := AppendCanonical(nil, []byte(c.body), Options{Mode: c.mode})
		if err != nil || string(out) != c.want {
			t.Errorf("%v: got %s (%v), want %s", c.mode, out, err, c.want)
		}
	}
}

// routingText lays out a body's routing text in mode.
func routingText(t *testing.T, body string, mode Mode) RoutingText {
	t.Helper()
	out, _, err := Normalize(nil, []byte(body), Options{Mode: mode}, KeyOptions{Mode: mode})
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	rt, err := LayOutRoutingText(out, mode)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestModeRoutingText(t *testing.T) {
	const us, rs = "\x1f", "\x1e"
	for _, c := range []struct {
		mode  Mode
		body  string
		want  string
		whole bool
	}{
		{ModeResponses,
			`{"model":"m","instructions":"Be brief.","tools":[{"type":"function","name":"f"}],"previous_response_id":"resp_1","input":[` +
				`{"role":"user","content":[{"type":"input_text","text":"doc"},{"type":"input_image","image_url":"u"}]},` +
				`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
				`{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"ok","annotations":[]}]},` +
				`{"role":"user","content":"the question"}]}`,
			"instructions" + us + "Be brief." + rs + "tools" + us + `[{"name":"f","type":"function"}]` + rs +
				"user" + us + "doc\n" + `{"image_url":"u","type":"input_image"}` + rs +
				us + `{"arguments":"{}","call_id":"c1","name":"f","type":"function_call"}` + rs +
				"assistant" + us + "ok" + rs, false},
		{ModeResponses, `{"model":"m","input":"only"}`, "user" + us + "only" + rs, true},
		{ModeResponses, `{"model":"m","instructions":null,"tools":null,"input":[{"role":"user","content":"one"}]}`, "user" + us + "one" + rs, true},
		{ModeResponses, `{"model":"m","instructions":"i","input":[{"role":"user","content":"one"}]}`, "instructions" + us + "i" + rs, false},
		{ModeResponses, `{"model":"m","tools":[],"input":"one"}`, "tools" + us + "[]" + rs, false},
		{ModeMessages, `{"model":"m","max_tokens":5,"system":"s","messages":[{"role":"user","content":"q"}]}`, "system" + us + "s" + rs, false},
		{ModeMessages,
			`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],` +
				`"tools":[{"name":"f","input_schema":{},"cache_control":{"type":"ephemeral"}}],"messages":[` +
				`{"role":"user","content":[{"type":"text","text":"doc"},{"type":"image","source":{"data":"x"},"cache_control":{"type":"ephemeral"}}]},` +
				`{"role":"assistant","content":"a1"},{"role":"user","content":"q"}]}`,
			"system" + us + "sys" + rs + "tools" + us + `[{"input_schema":{},"name":"f"}]` + rs +
				"user" + us + "doc\n" + `{"source":{"data":"x"},"type":"image"}` + rs + "assistant" + us + "a1" + rs, false},
		{ModeMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"input_text","text":"t"}]}]}`,
			"user" + us + `{"text":"t","type":"input_text"}` + rs, true},
		{ModePooling, `{"model":"m","documents":["a",{"text":"b"}],"query":"q","top_n":1}`,
			"query" + us + "q" + rs + "documents" + us + "a" + rs + `{"text":"b"}` + rs, true},
		{ModePooling, `{"model":"m","input":[1,2],"text_2":null}`, "input" + us + "1" + rs + "2" + rs + "text_2" + us + "null" + rs, true},
	} {
		rt := routingText(t, c.body, c.mode)
		if string(rt.Text) != c.want || rt.Whole != c.whole {
			t.Errorf("%v %s:\n got %q whole %v\nwant %q whole %v", c.mode, c.body, rt.Text, rt.Whole, c.want, c.whole)
		}
		checkSegments(t, c.body, c.mode, rt)
	}
}

// checkSegments: each string segment's run is the text of the string at
// its span of the canonical body, and each JSON segment's span is a whole
// value there.
func checkSegments(t *testing.T, body string, mode Mode, rt RoutingText) {
	t.Helper()
	canon, _, _ := AppendCanonical(nil, []byte(body), Options{Mode: mode})
	for _, s := range rt.Segments {
		span := canon[s.ValueStart:s.ValueEnd]
		if s.JSON {
			if end, err := valueEnd(canon, s.ValueStart); err != nil || end != s.ValueEnd {
				t.Errorf("%s: JSON segment %+v is not a value: %q", body, s, span)
			}
			continue
		}
		text, _, err := appendString(nil, canon, s.ValueStart)
		if err != nil || !bytes.Equal(text, rt.Text[s.Start:s.End]) {
			t.Errorf("%s: segment %+v holds %q, value %q", body, s, rt.Text[s.Start:s.End], span)
		}
	}
}

func keyOf(t *testing.T, body string, mode Mode) RouteInfo {
	t.Helper()
	_, ri, err := Normalize(nil, []byte(body), Options{Mode: mode}, KeyOptions{Mode: mode, Blocks: true, PrefixLength: MinPrefixLength})
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return ri
}

func TestResponsesKey(t *testing.T) {
	doc := strings.Repeat("The shared report. ", 200)
	body := func(extra, question string) string {
		return `{"model":"m",` + extra + `"instructions":"Answer from the report.","input":[{"role":"user","content":[{"type":"input_text","text":"` + doc + `"}]},{"role":"user","content":"` + question + `"}]}`
	}
	base := keyOf(t, body("", "What grew?"), ModeResponses)
	if base.Mode != ModeResponses || len(base.SpillKeys) == 0 {
		t.Fatalf("unexpected route info %+v", base)
	}
	for _, same := range []string{
		body("", "Something else entirely?"),
		body(`"previous_response_id":"resp_9","temperature":0.1,"background":true,"store":false,"metadata":{"k":"v"},`, "What grew?"),
	} {
		if ri := keyOf(t, same, ModeResponses); ri.Key != base.Key || !slices.Equal(ri.SpillKeys, base.SpillKeys) {
			t.Errorf("key changed for %.120s", same)
		}
	}
	other := strings.Replace(body("", "What grew?"), "Answer from", "Quote", 1)
	if keyOf(t, other, ModeResponses).Key == base.Key {
		t.Error("instructions do not move the key")
	}
	// A string input is one user message.
	a := keyOf(t, `{"model":"m","input":"hello"}`, ModeResponses)
	b := keyOf(t, `{"model":"m","input":[{"role":"user","content":"hello"}]}`, ModeResponses)
	if a.Key != b.Key || !slices.Equal(a.Blocks, b.Blocks) {
		t.Error("a string input keys unlike the same one-message input")
	}
}

// TestLoneQuestionSharesKey: bodies with one shared head (instructions or
// system, or tools) and one different question each get one key, since the
// final item is left out when anything comes before it; the same questions
// alone key apart.
func TestLoneQuestionSharesKey(t *testing.T) {
	head := strings.Repeat("Answer from the shared report. ", 80)
	questions := []string{"What grew?", "Who signed it?", "When was it due?", "Why the delay?", "How much?"}
	for _, c := range []struct {
		mode Mode
		body func(q string) string
	}{
		{ModeResponses, func(q string) string { return `{"model":"m","instructions":"` + head + `","input":"` + q + `"}` }},
		{ModeResponses, func(q string) string {
			return `{"model":"m","instructions":"` + head + `","input":[{"role":"user","content":"` + q + `"}]}`
		}},
		{ModeResponses, func(q string) string {
			return `{"model":"m","tools":[{"type":"function","name":"f"}],"input":[{"type":"function_call_output","call_id":"` + q + `"}]}`
		}},
		{ModeMessages, func(q string) string {
			return `{"model":"m","max_tokens":8,"system":"` + head + `","messages":[{"role":"user","content":"` + q + `"}]}`
		}},
		{ModeMessages, func(q string) string {
			return `{"model":"m","max_tokens":8,"system":[{"type":"text","text":"` + head + `"}],"messages":[{"role":"user","content":[{"type":"text","text":"` + q + `"}]}]}`
		}},
	} {
		base := keyOf(t, c.body(questions[0]), c.mode)
		for _, q := range questions[1:] {
			if ri := keyOf(t, c.body(q), c.mode); ri.Key != base.Key || !slices.Equal(ri.SpillKeys, base.SpillKeys) {
				t.Errorf("%v: %q keys apart from %q in %.80s", c.mode, q, questions[0], c.body(q))
			}
		}
	}
	alone := func(q string) string { return `{"model":"m","input":"` + q + `"}` }
	if keyOf(t, alone("a"), ModeResponses).Key == keyOf(t, alone("b"), ModeResponses).Key {
		t.Error("a lone input with nothing before it does not key on itself")
	}
}

// TestResponsesAnswerBlocks: the next turn, which sends the answer back as
// an assistant message, starts with the blocks AnswerBlocks predicted.
func TestResponsesAnswerBlocks(t *testing.T) {
	turn1 := `{"model":"m","instructions":"i","input":[{"role":"user","content":"` + strings.Repeat("u1 ", 50) + `"}]}`
	turn2 := `{"model":"m","instructions":"i","input":[{"role":"user","content":"` + strings.Repeat("u1 ", 50) + `"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"the answer"}]},{"role":"user","content":"u2"}]}`
	want := keyOf(t, turn1, ModeResponses).AnswerBlocks([]byte("the answer"))
	got := keyOf(t, turn2, ModeResponses).Blocks
	if len(want) == 0 || len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("next turn's blocks %x do not start with %x", got, want)
	}
}

// TestMessagesCacheControl: bodies that differ only in cache_control get one
// key and one set of blocks, and each keeps its cache_control.
func TestMessagesCacheControl(t *testing.T) {
	const cc = `"cache_control":{"type":"ephemeral","ttl":"1h"},`
	tmpl := `{"model":"m","max_tokens":64,{TOP}"system":[{{CC}"type":"text","text":"` + strings.Repeat("sys ", 300) + `"}],` +
		`"tools":[{{CC}"name":"f","input_schema":{"type":"object"}}],"messages":[` +
		`{"role":"user","content":[{{CC}"type":"text","text":"doc"},{{CC}"type":"document","source":{"type":"text","data":"d"}}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},` +
		`{"role":"user","content":[{{CC}"type":"tool_result","tool_use_id":"t1","content":[{{CC}"type":"text","text":"r"}]}]},` +
		`{"role":"user","content":"q"}]}`
	plain := strings.NewReplacer("{TOP}", "", "{CC}", "").Replace(tmpl)
	marked := strings.NewReplacer("{TOP}", cc, "{CC}", cc).Replace(tmpl)
	a, b := keyOf(t, plain, ModeMessages), keyOf(t, marked, ModeMessages)
	if a.Key != b.Key || !slices.Equal(a.SpillKeys, b.SpillKeys) || !slices.Equal(a.Blocks, b.Blocks) || a.PromptTokens != b.PromptTokens {
		t.Errorf("cache_control moved the key or blocks: %+v vs %+v", a, b)
	}
	out, _, err := Normalize(nil, []byte(marked), Options{Mode: ModeMessages}, KeyOptions{Mode: ModeMessages})
	if err != nil || bytes.Count(out, []byte(`"cache_control"`)) != 7 {
		t.Errorf("canonical body lost cache_control: %s (%v)", out, err)
	}
	checkSegments(t, marked, ModeMessages, routingText(t, marked, ModeMessages))
	if c := keyOf(t, strings.Replace(plain, `"text":"doc"`, `"text":"other"`, 1), ModeMessages); slices.Equal(c.Blocks, a.Blocks) {
		t.Error("the first message does not move the blocks")
	}
}

func TestPoolingKey(t *testing.T) {
	q := strings.Repeat("query words ", 120)
	a := keyOf(t, `{"model":"r","query":"`+q+`","documents":["d1","d2"]}`, ModePooling)
	b := keyOf(t, `{"model":"r","query":"`+q+`","documents":["other","docs"],"top_n":3}`, ModePooling)
	if a.Key != b.Key {
		t.Error("a long shared query should decide the key")
	}
	if len(a.Blocks) == 0 || a.Blocks[0] != b.Blocks[0] {
		t.Error("a shared query should share its first block")
	}
}

func TestModeSchemaErrors(t *testing.T) {
	for _, c := range []struct {
		mode       Mode
		body, want string
	}{
		{ModeResponses, `[]`, "offset 0: a responses request must be a JSON object"},
		{ModeResponses, `{"model":"m"}`, "offset 0: a responses request needs an input"},
		{ModeResponses, `{"model":"m","input":5}`, "offset 21: input: expected a string or an array"},
		{ModeResponses, `{"model":"m","input":["x"]}`, "offset 22: input[0]: expected an object"},
		{ModeResponses, `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":{"x":1}}]}`,
			"offset 93: input[2].content: expected a string or an array"},
		{ModeResponses, `{"model":"m","input":[{"role":"user","content":["x"]}]}`, "offset 34: input[0].content[0]: expected an object"},
		{ModeResponses, `{"model":"m","input":[{"role":1}]}`, "offset 30: input[0].role: expected a string"},
		{ModeResponses, `{"model":"m","input":[{"call_id":"c"}]}`, "offset 22: input[0]: an item needs a role or a type"},
		{ModeResponses, `{"model":"m","input":[{"type":3}]}`, "offset 30: input[0].type: expected a string"},
		{ModeResponses, `{"model":"m","instructions":["i"],"input":"q"}`, "offset 28: instructions: expected a string or null"},
		{ModeResponses, `{"model":"m","tools":{},"input":"q"}`, "offset 21: tools: expected an array or null"},
		{ModeResponses, `{"model":"m","input":"q","previous_response_id":1}`, "offset 48: previous_response_id: expected a string or null"},
		{ModeMessages, `"x"`, "offset 1: a messages request must be a JSON object"},
		{ModeMessages, `{"model":"m"}`, "offset 0: a messages request needs a messages array"},
		{ModeMessages, `{"model":"m","messages":{}}`, "offset 24: messages: expected an array"},
		{ModeMessages, `{"model":"m","messages":[1]}`, "offset 25: messages[0]: expected an object"},
		{ModeMessages, `{"model":"m","messages":[{"content":"x"}]}`, "offset 25: messages[0]: a message needs a role"},
		{ModeMessages, `{"model":"m","messages":[{"role":"user"}]}`, "offset 25: messages[0]: a message needs content"},
		{ModeMessages, `{"model":"m","messages":[{"content":null,"role":"user"}]}`, "offset 36: messages[0].content: expected a string or an array"},
		{ModeMessages, `{"model":"m","messages":[{"content":["t"],"role":"user"}]}`, "offset 37: messages[0].content[0]: expected an object"},
		{ModeMessages, `{"model":"m","system":5,"messages":[]}`, "offset 22: system: expected a string, an array or null"},
		{ModeMessages, `{"model":"m","system":["s"],"messages":[]}`, "offset 23: system[0]: expected an object"},
		{ModePooling, `{"model":"m","top_n":1}`, "offset 0: a pooling request needs query, text_1, input, messages, documents or text_2"},
		{ModePooling, `1`, "offset 0: a pooling request must be a JSON object"},
	} {
		out, _, err := Normalize(nil, []byte(c.body), Options{Mode: c.mode}, KeyOptions{Mode: c.mode})
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrSchema) || ErrorCode(err) != CodeSchema {
			t.Errorf("%v %s: got %v (%s), want %s", c.mode, c.body, err, out, c.want)
			continue
		}
		// The offset is into the canonical body, as RouteKey reports it.
		canon, _, cerr := AppendCanonical(nil, []byte(c.body), Options{Mode: c.mode})
		if cerr != nil {
			continue
		}
		if _, kerr := RouteKey(canon, KeyOptions{Mode: c.mode}); kerr == nil || kerr.Error() != c.want {
			t.Errorf("%v %s: RouteKey %v, want %s", c.mode, c.body, kerr, c.want)
		}
	}
}

// TestModesKeyFromParse runs keyFromParse over the new modes' corpus and a
// few shapes in every mode, blocks included.
func TestModesKeyFromParse(t *testing.T) {
	bodies := []string{
		`{"model":"m","input":"q","instructions":"i"}`,
		`{"model":"m","max_tokens":1,"system":"s","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`,
		`{"model":"m","query":"q","documents":["a","b"]}`,
	}
	for _, b := range bodies {
		for _, m := range []Mode{ModeAuto, ModeChat, ModeCompletion, ModeNative, ModeResponses, ModeMessages, ModePooling} {
			for _, blocks := range []bool{false, true} {
				keyFromParse(t, []byte(b), ModeAuto, KeyOptions{Mode: m, Blocks: blocks})
				keyFromParse(t, []byte(b), m, KeyOptions{Blocks: blocks})
			}
		}
	}
}

// FuzzModes: in the Responses, Messages and pooling modes, the canonical
// form is stable, and the key read off the parse is RouteKey's key of the
// canonical bytes, errors included.
func FuzzModes(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range []Mode{ModeResponses, ModeMessages, ModePooling} {
			out, _, err := AppendCanonical(nil, data, Options{Mode: m})
			if err != nil {
				continue
			}
			if again, _, err := AppendCanonical(nil, out, Options{Mode: m}); err != nil || !bytes.Equal(again, out) {
				t.Fatalf("%v: not idempotent: %q -> %q", m, out, again)
			}
			for _, blocks := range []bool{false, true} {
				keyFromParse(t, data, m, KeyOptions{Blocks: blocks, PrefixLength: MinPrefixLength})
			}
			if rt, err := LayOutRoutingText(out, m); err == nil && rt.Text == nil && !reflect.DeepEqual(rt.Segments, []Segment(nil)) {
				t.Fatalf("%v: segments without text for %q", m, out)
			}
		}
	})
}
