package server_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/normalize"
)

// TestAnswerBlocksLearned: with prefix-index, a plain (not streamed) chat
// answer teaches the index the answer's blocks, so the next turn, which
// carries the answer, matches past the end of the turn before on the
// replica that answered; a streamed answer is not learned, so there the
// match stops at the previous prompt.
func TestAnswerBlocksLearned(t *testing.T) {
	h := startHarness(t, 2, server.Config{Policy: "prefix-index"}, vllmsim.Config{})
	doc := strings.Repeat("Shared handbook text for the answer test. ", 20)
	matched := regexp.MustCompile(`(\S+) matched (\d+),`)
	for _, stream := range []bool{false, true} {
		question := "first question, streamed " + strconv.FormatBool(stream)
		turn1 := []map[string]string{{"role": "system", "content": doc}, {"role": "user", "content": question}}
		body1, _ := json.Marshal(map[string]any{"model": "vllmsim/tiny", "messages": turn1, "max_tokens": 120, "ignore_eos": true, "stream": stream})
		status, hdr, out := call(t, http.MethodPost, h.base+"/v1/chat/completions", "application/json", body1, nil)
		if status != 200 {
			t.Fatalf("turn 1 (stream %v): status %d, body %s", stream, status, out)
		}
		home := hdr.Get(server.BackendHeader)
		answer := answerText(t, out, stream)
		if len(answer) < 4*normalize.BlockSize {
			t.Fatalf("turn 1 (stream %v): answer %q is too short to fill blocks", stream, answer)
		}
		turn2 := append(turn1, map[string]string{"role": "assistant", "content": answer}, map[string]string{"role": "user", "content": "and then?"})
		body2, _ := json.Marshal(map[string]any{"model": "vllmsim/tiny", "messages": turn2, "max_tokens": 3})
		// Matched tokens on home, as explain reports them: for turn 1
		// again (its whole prompt) and for turn 2.
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
		t.Logf("stream %v: on %s turn 1 matches %d tokens, turn 2 %d (turn 2 goes to %s)", stream, home, prev, got, to)
		if !stream && (got <= prev || to != home) {
			t.Errorf("plain answer: turn 2 matches %d tokens on %s and goes to %s; want more than turn 1's %d there (the answer learned)", got, home, to, prev)
		}
		if stream && got > prev {
			t.Errorf("streamed answer: turn 2 matches %d tokens on %s; want at most turn 1's %d (streams are not learned)", got, home, prev)
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
