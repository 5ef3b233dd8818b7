package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/normalize"
)

// modeTurns are a Responses and a Messages first turn and the next turn
// that sends back the answer {ANSWER} (a JSON string) as the SDKs do.
var modeTurns = map[normalize.Mode][2]string{
	normalize.ModeResponses: {
		`{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":"tell me a story"}]}`,
		`{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":"tell me a story"},` +
			`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":{ANSWER},"annotations":[]}]},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"role":"user","content":"and then?"}]}`,
	},
	normalize.ModeMessages: {
		`{"model":"m","max_tokens":9,"system":"Be brief.","messages":[{"role":"user","content":"tell me a story"}]}`,
		`{"model":"m","max_tokens":9,"system":"Be brief.","messages":[{"role":"user","content":"tell me a story"},` +
			`{"role":"assistant","content":[{"type":"text","text":{ANSWER}}]},{"role":"user","content":"and then?"}]}`,
	},
}

func modeInfo(t *testing.T, mode normalize.Mode, body string) normalize.RouteInfo {
	t.Helper()
	_, info, err := normalize.Normalize(nil, []byte(body), normalize.Options{Mode: mode}, normalize.KeyOptions{Mode: mode, Blocks: true})
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return info
}

// nextTurnBlocks are the blocks of mode's next turn carrying answer.
func nextTurnBlocks(t *testing.T, mode normalize.Mode, answer string) []uint64 {
	t.Helper()
	q, _ := json.Marshal(answer)
	return modeInfo(t, mode, strings.Replace(modeTurns[mode][1], "{ANSWER}", string(q), 1)).Blocks
}

// modeStream is a streamed answer of mode whose text is parts (each part
// in deltas of a few words), with the usage 812 prompt, 768 cached.
func modeStream(mode normalize.Mode, parts ...string) string {
	var b strings.Builder
	ev := func(typ string, v map[string]any) {
		v["type"] = typ
		raw, _ := json.Marshal(v)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, raw)
	}
	if mode == normalize.ModeResponses {
		ev("response.created", map[string]any{"response": map[string]any{"id": "resp_1", "usage": nil}})
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message"}})
		for i, p := range parts {
			ev("response.content_part.added", map[string]any{"output_index": 0, "content_index": i, "part": map[string]any{"type": "output_text", "text": ""}})
			for _, w := range strings.SplitAfter(p, " ") {
				ev("response.output_text.delta", map[string]any{"output_index": 0, "content_index": i, "delta": w})
			}
		}
		ev("response.completed", map[string]any{"response": map[string]any{"id": "resp_1",
			"usage": map[string]any{"input_tokens": 812, "input_tokens_details": map[string]any{"cached_tokens": 768}, "output_tokens": 9}}})
		return b.String()
	}
	ev("message_start", map[string]any{"message": map[string]any{"id": "msg_1", "content": []any{},
		"usage": map[string]any{"input_tokens": 812, "cache_read_input_tokens": 768, "output_tokens": 0}}})
	for i, p := range parts {
		ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, w := range strings.SplitAfter(p, " ") {
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": w}})
		}
		ev("content_block_stop", map[string]any{"index": i})
	}
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "max_tokens"}, "usage": map[string]any{"output_tokens": 9}})
	ev("message_stop", map[string]any{})
	return b.String()
}

// modePlain is the plain answer of mode whose text is parts.
func modePlain(mode normalize.Mode, parts ...string) []byte {
	var content []any
	typ := "text"
	if mode == normalize.ModeResponses {
		typ = "output_text"
	}
	for _, p := range parts {
		content = append(content, map[string]any{"type": typ, "text": p})
	}
	var v map[string]any
	if mode == normalize.ModeResponses {
		v = map[string]any{"id": "resp_1", "output": []any{map[string]any{"type": "message", "role": "assistant", "content": content}},
			"usage": map[string]any{"input_tokens": 812, "input_tokens_details": map[string]any{"cached_tokens": 768}}}
	} else {
		v = map[string]any{"id": "msg_1", "role": "assistant", "content": content,
			"usage": map[string]any{"input_tokens": 812, "cache_read_input_tokens": 768}}
	}
	raw, _ := json.Marshal(v)
	return raw
}

// TestModeAnswersLearned: a Responses or Messages answer, plain or
// streamed in reads cut anywhere, gives the usage it states and the blocks
// the next turn (which sends the answer back) starts with, for answers of
// one part and of two, with characters JSON escapes.
func TestModeAnswersLearned(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	hit := backends.Usage{PromptTokens: 812, CachedTokens: 768}
	for _, mode := range []normalize.Mode{normalize.ModeResponses, normalize.ModeMessages} {
		for _, parts := range [][]string{
			{strings.Repeat("once upon a \"time\" é ", 20)},
			{"first part, ", strings.Repeat("second part\n\t ", 9)},
		} {
			answer := strings.Join(parts, "\n")
			want := nextTurnBlocks(t, mode, answer)
			info := modeInfo(t, mode, modeTurns[mode][0])
			if got := answerBlocks(info, modePlain(mode, parts...)); len(got) <= len(info.Blocks) || !slices.Equal(got, want[:len(got)]) {
				t.Errorf("%v plain, %d parts: learned %d blocks, not the next turn's first", mode, len(parts), len(got))
			}
			x := &exchange{info: info, b: &backends.Backend{}, usage: backends.UnknownUsage}
			if u := x.b.ParseUsage(modePlain(mode, parts...)); u != hit {
				t.Errorf("%v plain: usage %+v, want %+v", mode, u, hit)
			}
			raw := []byte(modeStream(mode, parts...))
			as := x.readStream()
			for rest := raw; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(200))
				as.feed(rest[:n])
				rest = rest[n:]
			}
			as.finish()
			as.put()
			if x.usage != hit {
				t.Errorf("%v stream: usage %+v, want %+v", mode, x.usage, hit)
			}
			if len(x.answer) <= len(info.Blocks) || !slices.Equal(x.answer, want[:len(x.answer)]) {
				t.Errorf("%v stream, %d parts: learned %d blocks, not the next turn's first", mode, len(parts), len(x.answer))
			}
		}
	}
}

// TestModeAnswersNotLearned: what the next turn cannot be predicted from
// is not learned: a stream cut before its last event, a reasoning item
// first, a refusal, a tool_use block, and a plain answer with them.
func TestModeAnswersNotLearned(t *testing.T) {
	resp, msgs := normalize.ModeResponses, normalize.ModeMessages
	full := modeStream(resp, "some text ")
	cut := full[:strings.Index(full, "event: response.completed")]
	for _, tc := range []struct {
		name   string
		mode   normalize.Mode
		stream string
	}{
		{"responses without response.completed", resp, cut},
		{"responses reasoning first", resp, strings.Replace(full, `"item":{"type":"message"}`, `"item":{"type":"reasoning"}`, 1)},
		{"responses refusal", resp, strings.Replace(full, "event: response.completed",
			"event: response.refusal.delta\ndata: {\"type\":\"response.refusal.delta\",\"output_index\":0,\"content_index\":1,\"delta\":\"no\"}\n\nevent: response.completed", 1)},
		{"messages tool_use block", msgs, strings.Replace(modeStream(msgs, "text "), "event: message_delta",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"name\":\"f\"}}\n\nevent: message_delta", 1)},
		{"messages without message_stop", msgs, strings.Replace(modeStream(msgs, "text "), "message_stop", "ping", -1)},
	} {
		x := &exchange{info: modeInfo(t, tc.mode, modeTurns[tc.mode][0]), b: &backends.Backend{}, usage: backends.UnknownUsage}
		as := x.readStream()
		as.feed([]byte(tc.stream))
		as.finish()
		as.put()
		if x.answer != nil {
			t.Errorf("%s: learned %d blocks", tc.name, len(x.answer))
		}
	}
	info := modeInfo(t, msgs, modeTurns[msgs][0])
	tool := []byte(`{"content":[{"type":"text","text":"t"},{"type":"tool_use","name":"f","input":{}}]}`)
	reasoning := []byte(`{"output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"t"}]}]}`)
	if b := answerBlocks(info, tool); b != nil {
		t.Errorf("plain messages answer with tool_use: learned %d blocks", len(b))
	}
	if b := answerBlocks(modeInfo(t, resp, modeTurns[resp][0]), reasoning); b != nil {
		t.Errorf("plain responses answer with reasoning first: learned %d blocks", len(b))
	}
}
