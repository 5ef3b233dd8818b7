package prefixgate

import (
	"encoding/json"
	"slices"
	"unicode/utf8"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/normalize"
)

// CompletionSpec describes an OpenAI completion request: the prompt is one
// string, so there is no layout to choose; the routing text is the model and
// the prompt.
type CompletionSpec struct {
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
	// Parameters are other members of the request (max_tokens,
	// temperature, ...). model, prompt and prompt_cache_key are rejected.
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	// Group goes to "prompt_cache_key" and to the request's group: requests
	// of different groups never share a routing key. At most 64 printable
	// ASCII characters.
	Group string `json:"group,omitempty"`
}

// completionReserved are the members the completion builder sets itself.
var completionReserved = []string{"model", "prompt", "prompt_cache_key"}

// Validate reports the first problem that keeps the spec from rendering.
func (s *CompletionSpec) Validate() error {
	if s.Model == "" {
		return specErr("model", "is required")
	}
	if !utf8.ValidString(s.Model) {
		return specErr("model", "is not valid UTF-8")
	}
	if !utf8.ValidString(s.Prompt) {
		return specErr("prompt", "is not valid UTF-8")
	}
	for _, name := range slices.Sorted(mapKeys(s.Parameters)) {
		f := "parameters." + name
		if slices.Contains(completionReserved, name) {
			return specErr(f, "is set by the builder; use the spec's own field")
		}
		if !utf8.ValidString(name) {
			return specErr(f, "is not valid UTF-8")
		}
		if err := normalize.Validate(s.Parameters[name], normalize.Options{}); err != nil {
			return specErr(f, "%v", err)
		}
	}
	return validGroup(s.Group)
}

func validGroup(g string) error {
	if len(g) > normalize.MaxGroupBytes {
		return specErr("group", "is %d bytes, over %d", len(g), normalize.MaxGroupBytes)
	}
	for i := 0; i < len(g); i++ {
		if c := g[i]; c < 0x20 || c > 0x7e {
			return specErr("group", "has a non-printable byte 0x%02x at %d", c, i)
		}
	}
	return nil
}

// extra returns the members that travel in CompletionInput.extra_json.
func (s *CompletionSpec) extra() map[string]json.RawMessage {
	extra := map[string]json.RawMessage{}
	for k, v := range s.Parameters {
		extra[k] = v
	}
	if s.Group != "" {
		g, _ := json.Marshal(s.Group)
		extra["prompt_cache_key"] = g
	}
	return extra
}

// BuildCompletion renders the spec as an OpenAI completion request in
// canonical form (completion mode): the body the router forwards for
// Client.Complete, without "stream".
func BuildCompletion(s CompletionSpec) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	body := s.extra()
	body["model"], _ = json.Marshal(s.Model)
	body["prompt"], _ = json.Marshal(s.Prompt)
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, specErr("parameters", "%v", err)
	}
	return Canonicalize(raw, ModeCompletion)
}

// BuildCompletionKey returns BuildCompletion's body and its routing key: the
// key the router reports in Routing.Key for Client.Complete.
func BuildCompletionKey(s CompletionSpec, prefixLength int) ([]byte, RouteInfo, error) {
	body, err := BuildCompletion(s)
	if err != nil {
		return nil, RouteInfo{}, err
	}
	ri, err := Key(body, KeyOptions{Mode: ModeCompletion, PrefixLength: prefixLength})
	if err != nil {
		return nil, RouteInfo{}, err
	}
	return body, ri, nil
}

// CompletionInput converts the spec to the API's CompletionInput.
func (s CompletionSpec) CompletionInput() (*pb.CompletionInput, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	in := &pb.CompletionInput{Model: s.Model, Prompt: s.Prompt, Group: s.Group}
	if extra := s.extra(); len(extra) > 0 {
		b, err := json.Marshal(extra)
		if err != nil {
			return nil, specErr("parameters", "%v", err)
		}
		in.ExtraJson = string(b)
	}
	return in, nil
}
