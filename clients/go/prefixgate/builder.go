package prefixgate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prefixgate/prefixgate/normalize"
)

// Document is one document of a prompt, rendered into the system message
// under the fixed header "## Document {ID}: {Title}".
type Document struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	Text  string `json:"text"`
}

// Message is one turn of the conversation history.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// PromptSpec describes a chat prompt by what it is made of. Build renders it
// in the one layout of docs/sdk.md: stable content (instructions,
// documents, tools, history) first, the question as the final message,
// volatile content (metadata, group) in members the canonical form sorts
// last.
type PromptSpec struct {
	Model        string     `json:"model"`
	Instructions string     `json:"instructions,omitempty"`
	Documents    []Document `json:"documents,omitempty"`
	// Tools are OpenAI tool objects, kept as JSON so that numbers keep
	// their exact spelling.
	Tools    []json.RawMessage `json:"tools,omitempty"`
	History  []Message         `json:"history,omitempty"`
	Question string            `json:"question"`
	// Parameters are other members of the request (temperature,
	// max_tokens, ...). Names the builder sets itself are rejected.
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	// Metadata goes to the request's "metadata" member; it never changes the
	// routing key.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Group goes to "prompt_cache_key": requests of different groups never
	// share a routing key. At most 64 printable ASCII characters.
	Group string `json:"group,omitempty"`
}

// SpecError reports a prompt spec the builder cannot render.
type SpecError struct {
	Field  string
	Reason string
}

func (e *SpecError) Error() string { return "prompt spec: " + e.Field + ": " + e.Reason }

func specErr(field, format string, args ...any) error {
	return &SpecError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// layout is one request shape a spec renders as: the member the system
// text goes to ("" for chat's system message), the member of the turns,
// and the members the builder sets itself, which parameters may not name.
type layout struct {
	mode          normalize.Mode
	system, turns string
	reserved      []string
}

var (
	chatLayout      = layout{normalize.ModeChat, "", "messages", []string{"model", "messages", "tools", "metadata", "prompt_cache_key"}}
	responsesLayout = layout{normalize.ModeResponses, "instructions", "input", []string{"model", "instructions", "tools", "input", "metadata", "prompt_cache_key"}}
	messagesLayout  = layout{normalize.ModeMessages, "system", "messages", []string{"model", "system", "tools", "messages", "metadata", "prompt_cache_key"}}
)

// layoutOf is the layout of a build mode: chat, responses or messages.
func layoutOf(mode Mode) (layout, error) {
	switch mode {
	case ModeChat, ModeAuto:
		return chatLayout, nil
	case ModeResponses:
		return responsesLayout, nil
	case ModeMessages:
		return messagesLayout, nil
	}
	return layout{}, &SpecError{Field: "(mode)", Reason: fmt.Sprintf("a prompt spec builds chat, responses or messages requests, not %s", mode)}
}

// SystemText returns the system message text: the instructions, then each
// document under its header, separated by blank lines; "" when there is
// neither.
func (s *PromptSpec) SystemText() string {
	var parts []string
	if s.Instructions != "" {
		parts = append(parts, s.Instructions)
	}
	for _, d := range s.Documents {
		h := "## Document " + d.ID
		if d.Title != "" {
			h += ": " + d.Title
		}
		parts = append(parts, h+"\n\n"+d.Text)
	}
	return strings.Join(parts, "\n\n")
}

// Messages returns the rendered messages: the system message (if any), the
// history, then the question as the final user message.
func (s *PromptSpec) Messages() []Message {
	var ms []Message
	if sys := s.SystemText(); sys != "" {
		ms = append(ms, Message{Role: "system", Content: sys})
	}
	ms = append(ms, s.History...)
	return append(ms, Message{Role: "user", Content: s.Question})
}

// Validate reports the first problem that keeps the spec from rendering
// as a chat request.
func (s *PromptSpec) Validate() error { return s.validate(chatLayout) }

// validate reports the first problem that keeps the spec from rendering
// in layout l.
func (s *PromptSpec) validate(l layout) error {
	if s.Model == "" {
		return specErr("model", "is required")
	}
	if err := validText("model", s.Model); err != nil {
		return err
	}
	if s.Question == "" {
		return specErr("question", "is required")
	}
	if err := validText("question", s.Question); err != nil {
		return err
	}
	if err := validText("instructions", s.Instructions); err != nil {
		return err
	}
	for _, check := range []func() error{s.validateDocuments, s.validateTools, s.validateHistory} {
		if err := check(); err != nil {
			return err
		}
	}
	if err := s.validateParameters(l.reserved); err != nil {
		return err
	}
	if len(s.Group) > normalize.MaxGroupBytes {
		return specErr("group", "is %d bytes, over %d", len(s.Group), normalize.MaxGroupBytes)
	}
	for i := 0; i < len(s.Group); i++ {
		if c := s.Group[i]; c < 0x20 || c > 0x7e {
			return specErr("group", "has a non-printable byte 0x%02x at %d", c, i)
		}
	}
	return nil
}

// validText reports a text field that is not valid UTF-8.
func validText(field, v string) error {
	if !utf8.ValidString(v) {
		return specErr(field, "is not valid UTF-8")
	}
	return nil
}

func (s *PromptSpec) validateDocuments() error {
	for i, d := range s.Documents {
		f := fmt.Sprintf("documents[%d]", i)
		if d.ID == "" {
			return specErr(f+".id", "is required")
		}
		for _, v := range [][2]string{{".id", d.ID}, {".title", d.Title}, {".text", d.Text}} {
			if err := validText(f+v[0], v[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *PromptSpec) validateTools() error {
	for i, t := range s.Tools {
		f := fmt.Sprintf("tools[%d]", i)
		if err := normalize.Validate(t, normalize.Options{}); err != nil {
			return specErr(f, "%v", err)
		}
		if b := bytes.TrimLeft(t, " \t\r\n"); len(b) == 0 || b[0] != '{' {
			return specErr(f, "must be a JSON object")
		}
	}
	return nil
}

func (s *PromptSpec) validateHistory() error {
	for i, m := range s.History {
		f := fmt.Sprintf("history[%d]", i)
		if m.Role == "" {
			return specErr(f+".role", "is required")
		}
		if err := validText(f+".role", m.Role); err != nil {
			return err
		}
		if err := validText(f+".content", m.Content); err != nil {
			return err
		}
	}
	return nil
}

// validateParameters checks the parameters and the metadata, in sorted
// order of their names so that the first problem is always the same one.
func (s *PromptSpec) validateParameters(reserved []string) error {
	for _, name := range slices.Sorted(mapKeys(s.Parameters)) {
		f := "parameters." + name
		if slices.Contains(reserved, name) {
			return specErr(f, "is set by the builder; use the spec's own field")
		}
		if err := validText(f, name); err != nil {
			return err
		}
		if err := normalize.Validate(s.Parameters[name], normalize.Options{}); err != nil {
			return specErr(f, "%v", err)
		}
	}
	for _, k := range slices.Sorted(mapKeys(s.Metadata)) {
		if err := validText("metadata", k); err != nil {
			return err
		}
		if err := validText("metadata."+k, s.Metadata[k]); err != nil {
			return err
		}
	}
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Build renders the spec as an OpenAI chat completion request in canonical
// form (chat mode).
func Build(s PromptSpec) ([]byte, error) { return render(s, chatLayout) }

// BuildResponses renders the spec as an OpenAI Responses request in
// canonical form (responses mode): the system text (instructions, then
// the documents) in "instructions", the tools as given in "tools", the
// history and then the question as message items of "input"; parameters,
// metadata and group as Build places them.
func BuildResponses(s PromptSpec) ([]byte, error) { return render(s, responsesLayout) }

// BuildMessages renders the spec as an Anthropic Messages request in
// canonical form (messages mode): the system text in "system", the tools
// as given in "tools", the history and then the question in "messages";
// parameters (the API requires max_tokens), metadata and group as Build
// places them.
func BuildMessages(s PromptSpec) ([]byte, error) { return render(s, messagesLayout) }

// BuildAs renders the spec as a request of mode: ModeChat (or ModeAuto),
// ModeResponses or ModeMessages.
func BuildAs(s PromptSpec, mode Mode) ([]byte, error) {
	l, err := layoutOf(mode)
	if err != nil {
		return nil, err
	}
	return render(s, l)
}

// render renders the spec in layout l: the model, the system text, the
// tools, the turns (history, then the question), the parameters, then the
// volatile members, and puts the request in canonical form.
func render(s PromptSpec, l layout) ([]byte, error) {
	if err := s.validate(l); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"model":`)
	writeString(&b, s.Model)
	turns := s.Messages()
	if l.system != "" {
		turns = append(slices.Clip(s.History), Message{Role: "user", Content: s.Question})
		if sys := s.SystemText(); sys != "" {
			b.WriteString(`,"` + l.system + `":`)
			writeString(&b, sys)
		}
	}
	if len(s.Tools) > 0 {
		b.WriteString(`,"tools":[`)
		for i, t := range s.Tools {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(t)
		}
		b.WriteByte(']')
	}
	b.WriteString(`,"` + l.turns + `":[`)
	for i, m := range turns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":`)
		writeString(&b, m.Role)
		b.WriteString(`,"content":`)
		writeString(&b, m.Content)
		b.WriteByte('}')
	}
	b.WriteByte(']')
	writeVolatile(&b, s)
	b.WriteByte('}')
	out, _, err := normalize.AppendCanonical(nil, b.Bytes(), normalize.Options{Mode: l.mode})
	if err != nil {
		// Validate checked every part; reaching here is a bug, reported
		// rather than hidden.
		return nil, fmt.Errorf("prompt spec: rendered request is invalid: %w", err)
	}
	return out, nil
}

// writeVolatile writes the parameters, the metadata and the group.
func writeVolatile(b *bytes.Buffer, s PromptSpec) {
	for _, name := range slices.Sorted(mapKeys(s.Parameters)) {
		b.WriteByte(',')
		writeString(b, name)
		b.WriteByte(':')
		b.Write(s.Parameters[name])
	}
	if len(s.Metadata) > 0 {
		b.WriteString(`,"metadata":{`)
		for i, k := range slices.Sorted(mapKeys(s.Metadata)) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeString(b, s.Metadata[k])
		}
		b.WriteByte('}')
	}
	if s.Group != "" {
		b.WriteString(`,"prompt_cache_key":`)
		writeString(b, s.Group)
	}
}

// BuildKey renders the spec and returns the request with its routing key
// (chat mode, the default routing window unless prefixLength is set).
func BuildKey(s PromptSpec, prefixLength int) ([]byte, RouteInfo, error) {
	body, err := Build(s)
	if err != nil {
		return nil, RouteInfo{}, err
	}
	ri, err := normalize.RouteKey(body, KeyOptions{Mode: ModeChat, PrefixLength: prefixLength})
	return body, ri, err
}

// BuildKeyAs renders the spec as a request of mode (see BuildAs) and
// returns it with its routing key in that mode: the key the router
// reports for the request on its path.
func BuildKeyAs(s PromptSpec, mode Mode, prefixLength int) ([]byte, RouteInfo, error) {
	body, err := BuildAs(s, mode)
	if err != nil {
		return nil, RouteInfo{}, err
	}
	if mode == ModeAuto {
		mode = ModeChat
	}
	ri, err := normalize.RouteKey(body, KeyOptions{Mode: mode, PrefixLength: prefixLength})
	return body, ri, err
}

// writeString writes s as a JSON string; Validate has checked it is UTF-8.
// Canonicalization rewrites the escapes into JCS form afterwards.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// ParseSpec reads a prompt spec from JSON. The text must be valid I-JSON
// (errors are *SyntaxError with the byte offset); unknown members are
// rejected so that a misspelt field does not silently drop content.
func ParseSpec(data []byte) (PromptSpec, error) {
	var s PromptSpec
	if err := normalize.Validate(data, normalize.Options{}); err != nil {
		return s, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, &SpecError{Field: "(spec)", Reason: err.Error()}
	}
	return s, nil
}

// BuildJSON parses a prompt spec from JSON and builds its request.
func BuildJSON(data []byte) ([]byte, error) { return BuildJSONAs(data, ModeChat) }

// BuildJSONAs parses a prompt spec from JSON and builds its request as a
// request of mode (see BuildAs).
func BuildJSONAs(data []byte, mode Mode) ([]byte, error) {
	s, err := ParseSpec(data)
	if err != nil {
		return nil, err
	}
	return BuildAs(s, mode)
}
