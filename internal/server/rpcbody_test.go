package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/normalize"
)

// TestRPCBodyMatchesREST: over generated Chat and Complete inputs, the body
// the RPCs now write normalizes to the same canonical bytes and key as the
// JSON body built through a map and encoding/json, which is what a REST
// client sending the same request produces; what one refuses the other
// refuses too.
func TestRPCBodyMatchesREST(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 3))
	texts := []string{"", "hello", "a \"quoted\" line\nnext", "<tag> & é € 😀", "tab\tand\u2028sep", "\x01\x1f ctl", strings.Repeat("long prefix text ", 400)}
	text := func() string { return texts[r.IntN(len(texts))] + texts[r.IntN(len(texts))] }
	jsons := []string{`{"type":"object","properties":{"q":{"type":"string"}}}`, `[1,2.50,1e3]`, `{"b":1,"a":[true,null]}`, `"s"`, `{bad`, `{"a":1,"a":2}`}
	extras := []string{"", `{}`, `{"temperature":0.5,"max_tokens":16}`, `{"user":"u1","metadata":{"z":1,"a":2},"top_p":1.0}`, `{"stream":false,"n":2}`, `{"model":"x"}`, `[1]`, `{"seed":1e400}`}
	compared := 0
	for i := 0; i < 3000; i++ {
		stream := r.IntN(2) == 0
		var got, want []byte
		var gerr, werr error
		mode := normalize.ModeChat
		if r.IntN(4) == 0 {
			mode = normalize.ModeCompletion
			in := &pb.CompletionInput{Model: text(), Prompt: text(), ExtraJson: extras[r.IntN(len(extras))]}
			got, gerr = completionBody(in, stream)
			want, werr = mapCompletionBody(in, stream)
		} else {
			in := &pb.ChatInput{Model: text(), ExtraJson: extras[r.IntN(len(extras))]}
			for n := r.IntN(3); n > 0; n-- {
				tool := &pb.Tool{Name: text(), Description: text()}
				if r.IntN(2) == 0 {
					tool.Type = "function"
				}
				if r.IntN(2) == 0 {
					tool.ParametersJson = jsons[r.IntN(len(jsons))]
				}
				in.Tools = append(in.Tools, tool)
			}
			for n := 1 + r.IntN(4); n > 0; n-- {
				m := &pb.Message{Role: []string{"system", "user", "assistant", "tool", ""}[r.IntN(5)]}
				if r.IntN(3) == 0 {
					for k := 1 + r.IntN(3); k > 0; k-- {
						p := &pb.ContentPart{Type: []string{"text", "image_url", ""}[r.IntN(3)], Text: text()}
						if p.Type == "image_url" {
							p.ImageUrl = "https://example.com/" + text()
						}
						m.Parts = append(m.Parts, p)
					}
				}
				if len(m.Parts) == 0 || r.IntN(10) == 0 {
					m.Content = text()
				}
				if r.IntN(4) == 0 {
					m.Name = text()
				}
				if r.IntN(4) == 0 {
					m.ToolCallId = "call-" + text()
				}
				if r.IntN(4) == 0 {
					m.ToolCallsJson = jsons[r.IntN(len(jsons))]
				}
				in.Messages = append(in.Messages, m)
			}
			got, gerr = chatBody(in, stream)
			want, werr = mapChatBody(in, stream)
		}
		kopts := normalize.KeyOptions{Mode: mode, Blocks: true}
		var gout, wout []byte
		var gri, wri normalize.RouteInfo
		if gerr == nil {
			gout, gri, gerr = normalize.Normalize(nil, got, normalize.Options{Mode: mode}, kopts)
		}
		if werr == nil {
			wout, wri, werr = normalize.Normalize(nil, want, normalize.Options{Mode: mode}, kopts)
		}
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("case %d: rpcBody error %v, map error %v\nrpcBody %s\nmap %s", i, gerr, werr, got, want)
		}
		if gerr != nil {
			continue
		}
		if !bytes.Equal(gout, wout) || !reflect.DeepEqual(gri, wri) {
			t.Fatalf("case %d: canonical bodies differ\nrpcBody %s\nmap     %s", i, gout, wout)
		}
		compared++
	}
	if compared < 1000 {
		t.Fatalf("only %d of 3000 generated requests were valid", compared)
	}
}

// mapChatBody is the map and encoding/json builder the RPCs used before
// rpcBody, kept as the reference: it renders a ChatInput as an OpenAI chat completion request.
func mapChatBody(in *pb.ChatInput, stream bool) ([]byte, error) {
	if in == nil {
		return nil, &pipeline.Error{Status: http.StatusBadRequest, Code: "missing_input", Message: "input is required"}
	}
	body, err := extraMembers(in.GetExtraJson(), "model", "tools", "messages")
	if err != nil {
		return nil, err
	}
	body["model"] = in.GetModel()
	if len(in.GetTools()) > 0 {
		tools := make([]any, 0, len(in.GetTools()))
		for i, t := range in.GetTools() {
			fn := map[string]any{"name": t.GetName()}
			if t.GetDescription() != "" {
				fn["description"] = t.GetDescription()
			}
			if t.GetParametersJson() != "" {
				if !json.Valid([]byte(t.GetParametersJson())) {
					return nil, invalidField(fmt.Sprintf("tools[%d].parameters_json", i), "is not valid JSON")
				}
				fn["parameters"] = json.RawMessage(t.GetParametersJson())
			}
			typ := t.GetType()
			if typ == "" {
				typ = "function"
			}
			tools = append(tools, map[string]any{"type": typ, "function": fn})
		}
		body["tools"] = tools
	}
	msgs := make([]any, 0, len(in.GetMessages()))
	for i, m := range in.GetMessages() {
		if m.GetRole() == "" {
			return nil, invalidField(fmt.Sprintf("messages[%d].role", i), "is empty")
		}
		msg := map[string]any{"role": m.GetRole()}
		switch {
		case len(m.GetParts()) > 0 && m.GetContent() != "":
			return nil, invalidField(fmt.Sprintf("messages[%d]", i), "sets both content and parts")
		case len(m.GetParts()) > 0:
			parts := make([]any, 0, len(m.GetParts()))
			for _, p := range m.GetParts() {
				switch p.GetType() {
				case "image_url":
					parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": p.GetImageUrl()}})
				default:
					parts = append(parts, map[string]any{"type": "text", "text": p.GetText()})
				}
			}
			msg["content"] = parts
		default:
			msg["content"] = m.GetContent()
		}
		if m.GetName() != "" {
			msg["name"] = m.GetName()
		}
		if m.GetToolCallId() != "" {
			msg["tool_call_id"] = m.GetToolCallId()
		}
		if m.GetToolCallsJson() != "" {
			if !json.Valid([]byte(m.GetToolCallsJson())) {
				return nil, invalidField(fmt.Sprintf("messages[%d].tool_calls_json", i), "is not valid JSON")
			}
			msg["tool_calls"] = json.RawMessage(m.GetToolCallsJson())
		}
		msgs = append(msgs, msg)
	}
	body["messages"] = msgs
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	return json.Marshal(body)
}

// mapCompletionBody renders a CompletionInput as an OpenAI completion request.
func mapCompletionBody(in *pb.CompletionInput, stream bool) ([]byte, error) {
	if in == nil {
		return nil, &pipeline.Error{Status: http.StatusBadRequest, Code: "missing_input", Message: "input is required"}
	}
	body, err := extraMembers(in.GetExtraJson(), "model", "prompt")
	if err != nil {
		return nil, err
	}
	body["model"] = in.GetModel()
	body["prompt"] = in.GetPrompt()
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	return json.Marshal(body)
}

// extraMembers parses extra_json, which must be a JSON object whose members
// do not collide with the first-class fields.
func extraMembers(extra string, reserved ...string) (map[string]any, error) {
	body := map[string]any{}
	if extra == "" {
		return body, nil
	}
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader([]byte(extra)))
	if err := dec.Decode(&members); err != nil || members == nil {
		return nil, invalidField("extra_json", "is not a JSON object")
	}
	for _, r := range reserved {
		if _, ok := members[r]; ok {
			return nil, invalidField("extra_json", fmt.Sprintf("sets %q, which has its own field", r))
		}
	}
	for k, v := range members {
		body[k] = v
	}
	return body, nil
}
