package prefixgate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/clients/go/prefixgate"
)

func sampleSpec() prefixgate.PromptSpec {
	return prefixgate.PromptSpec{
		Model:        "vllmsim/tiny",
		Instructions: "Answer from the documents.",
		Documents:    []prefixgate.Document{{ID: "q3", Title: "Quarterly report", Text: strings.Repeat("Revenue grew. ", 40)}},
		Tools:        []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}`)},
		History:      []prefixgate.Message{{Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi."}},
		Question:     "What grew?",
		Parameters:   map[string]json.RawMessage{"max_tokens": json.RawMessage(`4`), "temperature": json.RawMessage(`0`)},
		Metadata:     map[string]string{"request_id": "r-1", "ts": "2026-05-01T10:00:00Z"},
	}
}

func TestBuildLayout(t *testing.T) {
	body, err := prefixgate.Build(sampleSpec())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"vllmsim/tiny","tools":[{"function":{"name":"lookup","parameters":{"type":"object"}},"type":"function"}],"messages":[{"content":"Answer from the documents.\n\n## Document q3: Quarterly report\n\n` +
		strings.Repeat("Revenue grew. ", 40) + `","role":"system"},{"content":"Hello","role":"user"},{"content":"Hi.","role":"assistant"},{"content":"What grew?","role":"user"}],"max_tokens":4,"temperature":0,"metadata":{"request_id":"r-1","ts":"2026-05-01T10:00:00Z"}}`
	if string(body) != want {
		t.Errorf("Build:\n got %s\nwant %s", body, want)
	}
}

// TestMetadataNeverChangesKey: volatile content sorts last and stays out of
// the routing text, so no metadata change moves a request.
func TestMetadataNeverChangesKey(t *testing.T) {
	base := sampleSpec()
	_, ri0, err := prefixgate.BuildKey(base, 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, md := range map[string]map[string]string{
		"none":    nil,
		"changed": {"request_id": "r-2", "ts": "2027-01-01T00:00:00Z"},
		"more":    {"a": "1", "z": strings.Repeat("x", 5000), "user": "u"},
	} {
		s := base
		s.Metadata = md
		_, ri, err := prefixgate.BuildKey(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ri.Key != ri0.Key {
			t.Errorf("metadata %s changed the key", name)
		}
	}
}

// TestGroupChangesOnlyItsMember: a group changes the key and appends
// prompt_cache_key at the end; every byte before it stays.
func TestGroupChangesOnlyItsMember(t *testing.T) {
	s := sampleSpec()
	plain, ri0, err := prefixgate.BuildKey(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Group = "tenant-a"
	grouped, ri1, err := prefixgate.BuildKey(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ri1.Key == ri0.Key {
		t.Error("group did not change the key")
	}
	stem := plain[:len(plain)-1]
	if !bytes.HasPrefix(grouped, stem) || string(grouped[len(stem):]) != `,"prompt_cache_key":"tenant-a"}` {
		t.Errorf("group changed more than its member:\n%s\n%s", plain, grouped)
	}
	// The same key as an explicit group option on the ungrouped body.
	ri2, err := prefixgate.Key(plain, prefixgate.KeyOptions{Mode: prefixgate.ModeChat, Group: "tenant-a"})
	if err != nil || ri2.Key != ri1.Key {
		t.Errorf("explicit group key %s, body group key %s (%v)", ri2.KeyHex(), ri1.KeyHex(), err)
	}
}

func TestBuildRejects(t *testing.T) {
	for name, c := range map[string]struct {
		edit  func(*prefixgate.PromptSpec)
		field string
	}{
		"no model":       {func(s *prefixgate.PromptSpec) { s.Model = "" }, "model"},
		"no question":    {func(s *prefixgate.PromptSpec) { s.Question = "" }, "question"},
		"reserved":       {func(s *prefixgate.PromptSpec) { s.Parameters["messages"] = json.RawMessage(`[]`) }, "parameters.messages"},
		"bad tool":       {func(s *prefixgate.PromptSpec) { s.Tools[0] = json.RawMessage(`[1]`) }, "tools[0]"},
		"doc id":         {func(s *prefixgate.PromptSpec) { s.Documents[0].ID = "" }, "documents[0].id"},
		"history role":   {func(s *prefixgate.PromptSpec) { s.History[1].Role = "" }, "history[1].role"},
		"group too long": {func(s *prefixgate.PromptSpec) { s.Group = strings.Repeat("g", 65) }, "group"},
		"group control":  {func(s *prefixgate.PromptSpec) { s.Group = "a\tb" }, "group"},
		"bad utf8":       {func(s *prefixgate.PromptSpec) { s.Question = "\xff" }, "question"},
	} {
		t.Run(name, func(t *testing.T) {
			s := sampleSpec()
			c.edit(&s)
			_, err := prefixgate.Build(s)
			var se *prefixgate.SpecError
			if !errors.As(err, &se) || se.Field != c.field {
				t.Fatalf("err %v, want a spec error on %s", err, c.field)
			}
		})
	}
	if _, err := prefixgate.BuildJSON([]byte(`{"model":"m","question":"q","qestion":"typo"}`)); err == nil {
		t.Error("unknown spec member accepted")
	}
}

// TestChatInputQuotesNames checks the message for a tool member ChatInput
// cannot carry: the name is quoted by the rule every SDK shares, so the
// Python and TypeScript suites expect the same bytes.
func TestChatInputQuotesNames(t *testing.T) {
	cases := []struct{ tool, want string }{
		{`{"type":"function","function":{"name":"f"},"x\u2028":1}`, `prompt spec: tools[0]: member "x\u2028" cannot be sent through ChatInput`},
		{`{"type":"function","function":{"name":"f","é😀":1}}`, `prompt spec: tools[0]: function member "\u00e9\U0001f600" cannot be sent through ChatInput`},
		// Of several, the first in document order, as Python and
		// TypeScript report it.
		{`{"type":"function","z":1,"y":2,"x":3,"w":4,"v":5,"u":6,"function":{"name":"f"}}`, `prompt spec: tools[0]: member "z" cannot be sent through ChatInput`},
		{`{"type":"function","function":{"name":"f","q":1,"p":2,"o":3,"n":4,"m":5,"l":6}}`, `prompt spec: tools[0]: function member "q" cannot be sent through ChatInput`},
	}
	for _, c := range cases {
		s := sampleSpec()
		s.Tools = []json.RawMessage{json.RawMessage(c.tool)}
		_, err := s.ChatInput()
		if err == nil || err.Error() != c.want {
			t.Errorf("tool %s: error %v, want %s", c.tool, err, c.want)
		}
	}
}

// TestBuildResponsesAndMessages: the same spec as a Responses and a
// Messages request keeps the stable parts first; the metadata and the
// question never move the key of the shared prefix, and each body is
// keyed in its own mode with the system text in its own member.
func TestBuildResponsesAndMessages(t *testing.T) {
	for _, c := range []struct {
		mode         prefixgate.Mode
		system, turn string
	}{
		{prefixgate.ModeResponses, `"instructions":"Answer from the documents.`, `"input":[{"content":"Hello","role":"user"}`},
		{prefixgate.ModeMessages, `"system":"Answer from the documents.`, `"messages":[{"content":"Hello","role":"user"}`},
	} {
		base := sampleSpec()
		base.Tools = nil
		body, ri0, err := prefixgate.BuildKeyAs(base, c.mode, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(body, []byte(`{"model":"vllmsim/tiny",`+c.system)) || !bytes.Contains(body, []byte(c.turn)) || ri0.Mode != c.mode {
			t.Errorf("%s: %s (key mode %s)", c.mode, body, ri0.Mode)
		}
		if i, j := bytes.Index(body, []byte(`"metadata"`)), bytes.Index(body, []byte(`"What grew?"`)); i < j {
			t.Errorf("%s: metadata before the question: %s", c.mode, body)
		}
		s := base
		s.Metadata, s.Question = map[string]string{"request_id": "r-2"}, "Something else entirely?"
		if _, ri, _ := prefixgate.BuildKeyAs(s, c.mode, 0); ri.Key != ri0.Key {
			t.Errorf("%s: metadata and question changed the key of the shared prefix", c.mode)
		}
		direct, err := prefixgate.BuildAs(base, c.mode)
		if err != nil || !bytes.Equal(direct, body) {
			t.Errorf("%s: BuildAs differs from BuildKeyAs: %v", c.mode, err)
		}
	}
	if b, _ := prefixgate.BuildResponses(sampleSpec()); !bytes.Contains(b, []byte(`"input":[`)) {
		t.Errorf("BuildResponses: %s", b)
	}
	if b, _ := prefixgate.BuildMessages(sampleSpec()); !bytes.Contains(b, []byte(`"system":"`)) {
		t.Errorf("BuildMessages: %s", b)
	}
}

// TestBuildAsRejects: each layout rejects the parameters it sets itself,
// and a mode it does not build.
func TestBuildAsRejects(t *testing.T) {
	for mode, name := range map[prefixgate.Mode]string{
		prefixgate.ModeResponses: "input",
		prefixgate.ModeMessages:  "system",
	} {
		s := sampleSpec()
		s.Parameters = map[string]json.RawMessage{name: json.RawMessage(`"x"`)}
		var se *prefixgate.SpecError
		if _, err := prefixgate.BuildAs(s, mode); !errors.As(err, &se) || se.Field != "parameters."+name {
			t.Errorf("%s with parameters.%s: %v; want a SpecError naming it", mode, name, err)
		}
		if _, err := prefixgate.Build(s); err != nil {
			t.Errorf("chat with parameters.%s: %v; chat does not set it", name, err)
		}
	}
	if _, err := prefixgate.BuildAs(sampleSpec(), prefixgate.ModePooling); err == nil || !strings.Contains(err.Error(), "pooling") {
		t.Errorf("pooling: %v; want an error naming the mode", err)
	}
}
