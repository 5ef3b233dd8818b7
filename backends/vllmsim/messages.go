package vllmsim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// writeAnthropicError answers an error in Anthropic's shape.
func writeAnthropicError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	switch status {
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case http.StatusInternalServerError:
		typ = "api_error"
	}
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

type messagesRequest struct {
	Model     string            `json:"model"`
	MaxTokens *int              `json:"max_tokens"`
	Messages  []anthropicTurn   `json:"messages"`
	System    json.RawMessage   `json:"system"`
	Tools     json.RawMessage   `json:"tools"`
	Stream    bool              `json:"stream"`
	Metadata  map[string]string `json:"metadata"`
}

type anthropicTurn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is one content block; cache_control is metadata, so it is
// not read.
type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Content json.RawMessage `json:"content"`
}

// blocksText returns a content's text: a string, or its blocks' text (tool
// uses as name(input), tool results as their content) joined by newlines.
func blocksText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", errors.New("must be a string or an array of content blocks")
	}
	text := ""
	for i, b := range blocks {
		var part string
		switch b.Type {
		case "text":
			part = b.Text
		case "tool_use":
			part = b.Name + "(" + string(b.Input) + ")"
		case "tool_result":
			if len(b.Content) == 0 {
				continue
			}
			var err error
			if part, err = blocksText(b.Content); err != nil {
				return "", fmt.Errorf("[%d].content: %v", i, err)
			}
		case "":
			return "", fmt.Errorf("[%d].type: field required", i)
		default:
			continue // images, documents, thinking: no text to the simulated model
		}
		if text != "" {
			text += "\n"
		}
		text += part
	}
	return text, nil
}

// prompt checks a Messages request and renders system, tools and messages.
func (m *messagesRequest) prompt() ([]Token, error) {
	if m.MaxTokens == nil {
		return nil, errors.New("max_tokens: field required")
	}
	if len(m.Messages) == 0 {
		return nil, errors.New("messages: field required and must not be empty")
	}
	var system string
	if len(m.System) > 0 && string(m.System) != "null" {
		s, err := blocksText(m.System)
		if err != nil {
			return nil, fmt.Errorf("system: %v", err)
		}
		system = s
	}
	msgs := preamble(system, stripCacheControl(m.Tools))
	for i, t := range m.Messages {
		switch t.Role {
		case "user", "assistant", "system": // vLLM accepts system turns too
		default:
			return nil, fmt.Errorf(`messages[%d].role: must be "user", "assistant" or "system", not %q`, i, t.Role)
		}
		if len(t.Content) == 0 || string(t.Content) == "null" {
			return nil, fmt.Errorf("messages[%d].content: field required", i)
		}
		text, err := blocksText(t.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content%v", i, prefixColon(err))
		}
		msgs = append(msgs, ChatMessage{Role: t.Role, Content: text})
	}
	return Tokenize(RenderChat(msgs)), nil
}

// prefixColon formats a nested error after a member name: "[2].type: ..."
// stays as is, a plain message gets ": ".
func prefixColon(err error) string {
	if s := err.Error(); len(s) > 0 && s[0] == '[' {
		return s
	}
	return ": " + err.Error()
}

// stripCacheControl drops the cache_control member of each tool: it steers
// Anthropic's cache and is not part of the prompt.
func stripCacheControl(tools json.RawMessage) json.RawMessage {
	var ts []map[string]json.RawMessage
	if len(tools) == 0 || json.Unmarshal(tools, &ts) != nil {
		return tools
	}
	for _, t := range ts {
		delete(t, "cache_control")
	}
	b, _ := json.Marshal(ts)
	return b
}

// anthropicUsage counts as vLLM does: input_tokens is the whole prompt,
// cache_read_input_tokens the part of it read from the prefix cache.
func anthropicUsage(ev Event) map[string]int {
	return map[string]int{
		"input_tokens":            ev.PromptTokens,
		"output_tokens":           ev.OutputTokens,
		"cache_read_input_tokens": ev.CachedTokens,
	}
}

func (r *Replica) handleMessages(w http.ResponseWriter, req *http.Request) {
	var m messagesRequest
	if !readJSONAs(w, req, &m, writeAnthropicError) {
		return
	}
	prompt, err := m.prompt()
	if err != nil {
		writeAnthropicError(w, http.StatusBadRequest, err.Error())
		return
	}
	run, ok := r.begin(w, req, genRequest{model: m.Model, prompt: prompt, maxTokens: m.MaxTokens,
		stream: m.Stream, fail: writeAnthropicError})
	if !ok {
		return
	}
	msg := map[string]any{
		"id": r.newUnderscoreID("msg"), "type": "message", "role": "assistant",
		"model": cmp.Or(m.Model, r.cfg.Model), "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
	}
	if m.Stream {
		r.streamMessage(w, req, msg, run)
		return
	}
	done, ok := r.finish(w, req, run)
	if !ok {
		return
	}
	msg["content"] = []any{map[string]string{"type": "text", "text": OutputText(0, done.OutputTokens)}}
	msg["stop_reason"] = "max_tokens"
	msg["usage"] = anthropicUsage(done)
	writeJSON(w, http.StatusOK, msg)
}

// streamMessage writes the Messages event stream of one begun request.
func (r *Replica) streamMessage(w http.ResponseWriter, req *http.Request, msg map[string]any, run running) {
	s := newSSEWriter(w, false)
	start := anthropicUsage(run.first)
	start["output_tokens"] = 0
	msg["usage"] = start
	sent := 0
	emit := func(upto int) bool {
		if upto <= sent {
			return true
		}
		ok := s.send("content_block_delta", map[string]any{"index": 0,
			"delta": map[string]string{"type": "text_delta", "text": OutputText(sent, upto)}})
		sent = upto
		return ok
	}
	ok := s.send("message_start", map[string]any{"message": msg}) &&
		s.send("content_block_start", map[string]any{"index": 0, "content_block": map[string]string{"type": "text", "text": ""}}) &&
		emit(1)
	if !ok {
		r.cancel(run.id)
		return
	}
	done, ok := r.streamUntilDone(req.Context(), emit, run)
	if !ok || !emit(done.OutputTokens) {
		return
	}
	_ = s.send("content_block_stop", map[string]any{"index": 0}) &&
		s.send("message_delta", map[string]any{
			"delta": map[string]any{"stop_reason": "max_tokens", "stop_sequence": nil},
			"usage": anthropicUsage(done),
		}) &&
		s.send("message_stop", map[string]any{})
}
