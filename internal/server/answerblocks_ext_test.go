package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/prefixgate/prefixgate/route"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/normalize"
)

// TestAnswerBlocksLearned: with prefix-index, a chat answer teaches the
// index the answer's blocks, so the next turn, which carries the answer,
// matches past the end of the turn before on the replica that answered and
// goes there. It holds for a plain answer (read whole for its usage), a
// streamed one on the REST proxy (its deltas gathered as the events pass),
// a Connect Chat and a Connect ChatStream, each over a real vllmsim
// replica.
func TestAnswerBlocksLearned(t *testing.T) {
	h := startHarness(t, 2, server.Config{Route: route.Config{Policy: "prefix-index"}}, vllmsim.Config{})
	client := prefixgatev1connect.NewInferenceServiceClient(http.DefaultClient, h.base)
	doc := strings.Repeat("Shared handbook text for the answer test. ", 20)
	matched := regexp.MustCompile(`(\S+) matched (\d+),`)
	for _, how := range []string{"plain", "stream", "connect", "connect-stream"} {
		question := "first question, answered " + how
		turn1 := []map[string]string{{"role": "system", "content": doc}, {"role": "user", "content": question}}
		body1, _ := json.Marshal(map[string]any{"model": "vllmsim/tiny", "messages": turn1, "max_tokens": 120, "ignore_eos": true})
		var home, answer string
		switch how {
		case "connect", "connect-stream":
			in := &pb.ChatInput{Model: "vllmsim/tiny", ExtraJson: `{"max_tokens":120,"ignore_eos":true}`}
			for _, m := range turn1 {
				in.Messages = append(in.Messages, &pb.Message{Role: m["role"], Content: m["content"]})
			}
			if how == "connect" {
				res, err := client.Chat(context.Background(), connect.NewRequest(&pb.ChatRequest{Input: in}))
				if err != nil {
					t.Fatalf("turn 1 (%s): %v", how, err)
				}
				home, answer = res.Msg.GetRouting().GetBackend(), res.Msg.GetContent()
				break
			}
			st, err := client.ChatStream(context.Background(), connect.NewRequest(&pb.ChatStreamRequest{Input: in}))
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for st.Receive() {
				if r := st.Msg().GetRouting(); r != nil {
					home = r.GetBackend()
				}
				text.WriteString(st.Msg().GetDelta())
			}
			if err := st.Err(); err != nil {
				t.Fatalf("turn 1 (%s): %v", how, err)
			}
			answer = text.String()
		default:
			body := body1
			if how == "stream" {
				body, _ = json.Marshal(map[string]any{"model": "vllmsim/tiny", "messages": turn1, "max_tokens": 120, "ignore_eos": true, "stream": true})
			}
			status, hdr, out := call(t, http.MethodPost, h.base+"/v1/chat/completions", "application/json", body, nil)
			if status != 200 {
				t.Fatalf("turn 1 (%s): status %d, body %s", how, status, out)
			}
			home = hdr.Get(server.BackendHeader)
			answer = answerText(t, out, how == "stream")
		}
		if len(answer) < 4*normalize.BlockSize {
			t.Fatalf("turn 1 (%s): answer %q is too short to fill blocks", how, answer)
		}
		turn2 := append(turn1, map[string]string{"role": "assistant", "content": answer}, map[string]string{"role": "user", "content": "and then?"})
		body2, _ := json.Marshal(map[string]any{"model": "vllmsim/tiny", "messages": turn2, "max_tokens": 3})
		// Matched tokens on home, as explain reports them: for turn 1
		// again (its whole prompt) and for turn 2. The exchange is
		// released as its handler returns, which may be just after the
		// client has read the last byte: poll, bounded.
		matchedOn := func(body []byte) (int, string) {
			status, _, raw := call(t, http.MethodPost, h.base+"/v1/explain", "application/json", body, nil)
			if status != 200 {
				t.Fatalf("explain: status %d, body %s", status, raw)
			}
			var ex struct{ Backend, Reason string }
			if err := json.Unmarshal(raw, &ex); err != nil {
				t.Fatal(err)
			}
			for _, m := range matched.FindAllStringSubmatch(ex.Reason, -1) {
				if m[1] == home {
					n, _ := strconv.Atoi(m[2])
					return n, ex.Backend
				}
			}
			t.Fatalf("explain names no match on %s: %s", home, ex.Reason)
			return 0, ""
		}
		prev, _ := matchedOn(body1)
		got, to := matchedOn(body2)
		for i := 0; i < 100 && (got <= prev || to != home); i++ {
			time.Sleep(10 * time.Millisecond)
			got, to = matchedOn(body2)
		}
		t.Logf("%s: on %s turn 1 matches %d tokens, turn 2 %d (turn 2 goes to %s)", how, home, prev, got, to)
		if got <= prev || to != home {
			t.Errorf("%s answer: turn 2 matches %d tokens on %s and goes to %s; want more than turn 1's %d there (the answer learned)", how, got, home, to, prev)
		}
	}
}

// answerText is the generated text of a chat completion, plain or streamed.
func answerText(t *testing.T, out []byte, stream bool) string {
	t.Helper()
	type choice struct {
		Message, Delta struct{ Content string }
	}
	if !stream {
		var r struct{ Choices []choice }
		if err := json.Unmarshal(out, &r); err != nil || len(r.Choices) == 0 {
			t.Fatalf("answer %s: %v", out, err)
		}
		return r.Choices[0].Message.Content
	}
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var r struct{ Choices []choice }
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			t.Fatalf("stream event %s: %v", data, err)
		}
		if len(r.Choices) > 0 {
			b.WriteString(r.Choices[0].Delta.Content)
		}
	}
	return b.String()
}

// TestModeAnswerBlocksLearned: with prefix-index, a Responses or Messages
// answer, plain or streamed, teaches the index its text, so the next turn,
// which sends the answer back, matches past the end of the turn before on
// the replica that answered and goes there (over real vllmsim replicas).
func TestModeAnswerBlocksLearned(t *testing.T) {
	h := startHarness(t, 2, server.Config{Route: route.Config{Policy: "prefix-index"}}, vllmsim.Config{})
	doc := strings.Repeat("Shared handbook text for the answer test. ", 20)
	matched := regexp.MustCompile(`(\S+) matched (\d+),`)
	for _, path := range []string{"/v1/responses", "/v1/messages"} {
		for _, stream := range []bool{false, true} {
			question := fmt.Sprintf("first question, %s stream %v", path, stream)
			turn := func(answer string) map[string]any {
				if path == "/v1/messages" {
					msgs := []any{map[string]any{"role": "user", "content": question}}
					if answer != "" {
						msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": answer}}},
							map[string]any{"role": "user", "content": "and then?"})
					}
					return map[string]any{"model": "vllmsim/tiny", "system": doc, "messages": msgs, "max_tokens": 120, "stream": stream && answer == ""}
				}
				items := []any{map[string]any{"role": "user", "content": question}}
				if answer != "" {
					items = append(items, map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": answer}}},
						map[string]any{"role": "user", "content": "and then?"})
				}
				return map[string]any{"model": "vllmsim/tiny", "instructions": doc, "input": items, "max_output_tokens": 120, "stream": stream && answer == ""}
			}
			body1, _ := json.Marshal(turn(""))
			status, hdr, out := call(t, http.MethodPost, h.base+path, "application/json", body1, nil)
			if status != 200 {
				t.Fatalf("%s turn 1: status %d, body %s", path, status, out)
			}
			home, answer := hdr.Get(server.BackendHeader), modeAnswer(t, out, stream)
			if len(answer) < 4*normalize.BlockSize {
				t.Fatalf("%s turn 1: answer %q is too short to fill blocks", path, answer)
			}
			plain := turn("")
			plain["stream"] = false
			body1, _ = json.Marshal(plain)
			body2, _ := json.Marshal(turn(answer))
			matchedOn := func(body []byte) (int, string) {
				status, _, raw := call(t, http.MethodPost, h.base+"/v1/explain?path="+path, "application/json", body, nil)
				if status != 200 {
					t.Fatalf("explain: status %d, body %s", status, raw)
				}
				var ex struct{ Backend, Reason string }
				if err := json.Unmarshal(raw, &ex); err != nil {
					t.Fatal(err)
				}
				for _, m := range matched.FindAllStringSubmatch(ex.Reason, -1) {
					if m[1] == home {
						n, _ := strconv.Atoi(m[2])
						return n, ex.Backend
					}
				}
				t.Fatalf("explain names no match on %s: %s", home, ex.Reason)
				return 0, ""
			}
			prev, _ := matchedOn(body1)
			got, to := matchedOn(body2)
			for i := 0; i < 100 && (got <= prev || to != home); i++ {
				time.Sleep(10 * time.Millisecond) // the exchange ends just after the client's last byte
				got, to = matchedOn(body2)
			}
			t.Logf("%s stream %v: on %s turn 1 matches %d tokens, turn 2 %d (turn 2 goes to %s)", path, stream, home, prev, got, to)
			if got <= prev || to != home {
				t.Errorf("%s stream %v: turn 2 matches %d tokens on %s and goes to %s; want more than turn 1's %d there (the answer learned)", path, stream, got, home, to, prev)
			}
		}
	}
}

// modeAnswer is the generated text of a Responses or Messages answer,
// plain or streamed.
func modeAnswer(t *testing.T, out []byte, stream bool) string {
	t.Helper()
	type part struct{ Type, Text string }
	if !stream {
		var r struct {
			Content []part
			Output  []struct{ Content []part }
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("answer %s: %v", out, err)
		}
		if len(r.Output) > 0 {
			r.Content = r.Output[0].Content
		}
		if len(r.Content) != 1 {
			t.Fatalf("answer %s: want one text part", out)
		}
		return r.Content[0].Text
	}
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string
			Delta json.RawMessage
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("stream event %s: %v", data, err)
		}
		var d struct{ Text string }
		switch ev.Type {
		case "response.output_text.delta":
			var s string
			_ = json.Unmarshal(ev.Delta, &s)
			b.WriteString(s)
		case "content_block_delta":
			_ = json.Unmarshal(ev.Delta, &d)
			b.WriteString(d.Text)
		}
	}
	return b.String()
}
