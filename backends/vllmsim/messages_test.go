package vllmsim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func messagesBody(system, user string, maxTokens int, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": "sim-model", "max_tokens": maxTokens, "stream": stream,
		"system":   []any{map[string]any{"type": "text", "text": system, "cache_control": map[string]string{"type": "ephemeral"}}},
		"messages": []any{map[string]any{"role": "user", "content": user}},
	})
	return string(b)
}

func TestMessagesPlainAndCacheRead(t *testing.T) {
	_, u := serve(t, fastConfig())
	system := strings.Repeat("You answer questions about routers. ", 10)
	status, m := postAny(t, u+"/v1/messages", messagesBody(system, "first question", 4, false))
	if status != 200 {
		t.Fatalf("%d %v", status, m)
	}
	id, _ := m["id"].(string)
	if !strings.HasPrefix(id, "msg_") || m["type"] != "message" || m["role"] != "assistant" ||
		m["stop_reason"] != "max_tokens" || m["model"] != "sim-model" {
		t.Fatalf("envelope %v", m)
	}
	if dig(m, "content", 0, "type") != "text" || dig(m, "content", 0, "text") != OutputText(0, 4) {
		t.Fatalf("content %v", m["content"])
	}
	if num(dig(m, "usage", "output_tokens")) != 4 || num(dig(m, "usage", "cache_read_input_tokens")) != 0 {
		t.Fatalf("first usage %v", m["usage"])
	}
	firstInput := num(dig(m, "usage", "input_tokens"))
	_, m = postAny(t, u+"/v1/messages", messagesBody(system, "second question", 4, false))
	in, read := num(dig(m, "usage", "input_tokens")), num(dig(m, "usage", "cache_read_input_tokens"))
	if read == 0 || read%BlockSize != 0 || read >= in || in != firstInput {
		t.Fatalf("second usage %v: the shared system prompt should be read from the cache", m["usage"])
	}
}

func TestMessagesStreamOrder(t *testing.T) {
	_, u := serve(t, fastConfig())
	evs := postStream(t, u+"/v1/messages", messagesBody("sys", "hello", 7, true))
	var types []string
	text := ""
	for _, e := range evs {
		if e.typ == "content_block_delta" {
			if dig(e.data, "delta", "type") != "text_delta" || num(e.data["index"]) != 0 {
				t.Fatalf("delta %v", e.data)
			}
			text += dig(e.data, "delta", "text").(string)
			if types[len(types)-1] == e.typ {
				continue
			}
		}
		types = append(types, e.typ)
	}
	want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %s, want %s", strings.Join(types, " "), want)
	}
	start, delta := evs[0].data, evs[len(evs)-2].data
	if dig(start, "message", "role") != "assistant" || dig(start, "message", "usage", "input_tokens") == nil {
		t.Fatalf("message_start %v", start)
	}
	if text != OutputText(0, 7) || dig(delta, "delta", "stop_reason") != "max_tokens" || num(dig(delta, "usage", "output_tokens")) != 7 {
		t.Fatalf("text %q, message_delta %v", text, delta)
	}
}

// TestMessagesCacheControlIsNotPrompt checks that cache_control members do
// not change the prompt, so requests with and without them share a prefix.
func TestMessagesCacheControlIsNotPrompt(t *testing.T) {
	with := messagesRequest{MaxTokens: new(int), System: json.RawMessage(`[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]`),
		Tools:    json.RawMessage(`[{"name":"f","input_schema":{},"cache_control":{"type":"ephemeral"}}]`),
		Messages: []anthropicTurn{{Role: "user", Content: json.RawMessage(`[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]`)}}}
	without := messagesRequest{MaxTokens: new(int), System: json.RawMessage(`"s"`),
		Tools:    json.RawMessage(`[{"name":"f","input_schema":{}}]`),
		Messages: []anthropicTurn{{Role: "user", Content: json.RawMessage(`"x"`)}}}
	a, err1 := with.prompt()
	b, err2 := without.prompt()
	if err1 != nil || err2 != nil || !slices.Equal(a, b) {
		t.Fatalf("prompts differ: %v %v", err1, err2)
	}
}

func TestMessagesInjectedFaultInAnthropicShape(t *testing.T) {
	cfg := fastConfig()
	cfg.Faults.ErrorRate = 1
	_, u := serve(t, cfg)
	status, m := postAny(t, u+"/v1/messages", messagesBody("s", "x", 2, false))
	if status != 500 || m["type"] != "error" || dig(m, "error", "type") != "api_error" {
		t.Fatalf("%d %v", status, m)
	}
}
