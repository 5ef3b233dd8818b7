package server

import (
	"cmp"
	"fmt"
	"net/http"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/normalize"
)

// The Connect RPCs write their OpenAI request body straight from the proto
// message: strings through normalize's canonical string writer, embedded
// JSON (extra_json, parameters_json, tool_calls_json) validated and
// written in canonical form by normalize, with no map and no encoding/json
// round trip. The pipeline's one pass (Normalize) then puts the members in
// schema order and keys the body, so an RPC's canonical body is the one the
// REST path makes of the same request (rpcbody_test.go).

// rpcBody is the body being written and the first error met.
type rpcBody struct {
	b   []byte
	err error
}

func (w *rpcBody) raw(s string) { w.b = append(w.b, s...) }

// str writes a member value string; field names the proto field in an
// error.
func (w *rpcBody) str(s, field string) {
	if w.err != nil {
		return
	}
	out, err := normalize.AppendString(w.b, s)
	if err != nil {
		w.err = invalidField(field, "is not valid text: "+err.Error())
		return
	}
	w.b = out
}

// json writes embedded JSON text in canonical form.
func (w *rpcBody) json(s, field string) {
	if w.err != nil {
		return
	}
	out, _, err := normalize.AppendCanonical(w.b, []byte(s), normalize.Options{})
	if err != nil {
		w.err = invalidField(field, "is not valid JSON: "+err.Error())
		return
	}
	w.b = out
}

// opt writes the member `,"name":` with string s, unless s is empty (the
// proto's unset); json says s is embedded JSON text. The proto field's
// name, for an error, is fieldFormat with index i, formatted only when the
// member is written.
func (w *rpcBody) opt(name, s string, json bool, fieldFormat string, i int) {
	if s == "" {
		return
	}
	w.raw(`,"` + name + `":`)
	if json {
		w.json(s, fmt.Sprintf(fieldFormat, i))
	} else {
		w.str(s, fmt.Sprintf(fieldFormat, i))
	}
}

// extra writes extra_json's members, which must not collide with the
// first-class fields; with stream, its own "stream" and "stream_options"
// give way to the RPC's.
func (w *rpcBody) extra(extra string, stream bool, reserved ...string) {
	if w.err != nil || extra == "" {
		return
	}
	mark := len(w.b)
	w.b = append(w.b, ',')
	out, err := normalize.AppendMembers(w.b, []byte(extra), normalize.Options{}, func(name []byte) (bool, error) {
		for _, r := range reserved {
			if string(name) == r {
				return false, invalidField("extra_json", fmt.Sprintf("sets %q, which has its own field", r))
			}
		}
		return !stream || (string(name) != "stream" && string(name) != "stream_options"), nil
	})
	if err != nil {
		if _, ok := err.(*pipeline.Error); !ok {
			err = invalidField("extra_json", "is not a JSON object: "+err.Error())
		}
		w.b, w.err = w.b[:mark], err
		return
	}
	if len(out) == mark+1 {
		out = out[:mark] // no members
	}
	w.b = out
}

func (w *rpcBody) end(stream bool) ([]byte, error) {
	if stream {
		w.raw(`,"stream":true,"stream_options":{"include_usage":true}`)
	}
	w.raw("}")
	return w.b, w.err
}

// chatBody writes a ChatInput as an OpenAI chat completion request.
func chatBody(in *pb.ChatInput, stream bool) ([]byte, error) {
	if in == nil {
		return nil, &pipeline.Error{Status: http.StatusBadRequest, Code: "missing_input", Message: "input is required"}
	}
	w := &rpcBody{b: make([]byte, 0, 256+len(in.GetExtraJson())+chatTextSize(in))}
	w.raw(`{"model":`)
	w.str(in.GetModel(), "model")
	if len(in.GetTools()) > 0 {
		w.raw(`,"tools":[`)
		for i, t := range in.GetTools() {
			if i > 0 {
				w.raw(",")
			}
			w.raw(`{"type":`)
			w.str(cmp.Or(t.GetType(), "function"), fmt.Sprintf("tools[%d].type", i))
			w.raw(`,"function":{"name":`)
			w.str(t.GetName(), fmt.Sprintf("tools[%d].name", i))
			w.opt("description", t.GetDescription(), false, "tools[%d].description", i)
			w.opt("parameters", t.GetParametersJson(), true, "tools[%d].parameters_json", i)
			w.raw("}}")
		}
		w.raw("]")
	}
	w.raw(`,"messages":[`)
	for i, m := range in.GetMessages() {
		if i > 0 {
			w.raw(",")
		}
		if m.GetRole() == "" {
			return nil, invalidField(fmt.Sprintf("messages[%d].role", i), "is empty")
		}
		if len(m.GetParts()) > 0 && m.GetContent() != "" {
			return nil, invalidField(fmt.Sprintf("messages[%d]", i), "sets both content and parts")
		}
		w.raw(`{"role":`)
		w.str(m.GetRole(), fmt.Sprintf("messages[%d].role", i))
		w.raw(`,"content":`)
		if len(m.GetParts()) > 0 {
			w.raw("[")
			for j, p := range m.GetParts() {
				if j > 0 {
					w.raw(",")
				}
				if p.GetType() == "image_url" {
					w.raw(`{"type":"image_url","image_url":{"url":`)
					w.str(p.GetImageUrl(), fmt.Sprintf("messages[%d].parts[%d].image_url", i, j))
					w.raw("}}")
				} else {
					w.raw(`{"type":"text","text":`)
					w.str(p.GetText(), fmt.Sprintf("messages[%d].parts[%d].text", i, j))
					w.raw("}")
				}
			}
			w.raw("]")
		} else {
			w.str(m.GetContent(), fmt.Sprintf("messages[%d].content", i))
		}
		w.opt("name", m.GetName(), false, "messages[%d].name", i)
		w.opt("tool_call_id", m.GetToolCallId(), false, "messages[%d].tool_call_id", i)
		w.opt("tool_calls", m.GetToolCallsJson(), true, "messages[%d].tool_calls_json", i)
		w.raw("}")
		if w.err != nil {
			return nil, w.err
		}
	}
	w.raw("]")
	w.extra(in.GetExtraJson(), stream, "model", "tools", "messages")
	return w.end(stream)
}

// chatTextSize estimates a chat body's text, to size its buffer once.
func chatTextSize(in *pb.ChatInput) int {
	n := 0
	for _, m := range in.GetMessages() {
		n += len(m.GetContent()) + 48
		for _, p := range m.GetParts() {
			n += len(p.GetText()) + len(p.GetImageUrl()) + 40
		}
	}
	for _, t := range in.GetTools() {
		n += len(t.GetParametersJson()) + len(t.GetDescription()) + 64
	}
	return n
}

// completionBody writes a CompletionInput as an OpenAI completion request.
func completionBody(in *pb.CompletionInput, stream bool) ([]byte, error) {
	if in == nil {
		return nil, &pipeline.Error{Status: http.StatusBadRequest, Code: "missing_input", Message: "input is required"}
	}
	w := &rpcBody{b: make([]byte, 0, 128+len(in.GetPrompt())+len(in.GetExtraJson()))}
	w.raw(`{"model":`)
	w.str(in.GetModel(), "model")
	w.raw(`,"prompt":`)
	w.str(in.GetPrompt(), "prompt")
	w.extra(in.GetExtraJson(), stream, "model", "prompt")
	return w.end(stream)
}
