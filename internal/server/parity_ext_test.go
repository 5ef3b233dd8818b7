package server_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/server"
)

// parityAPI sends one turn of a conversation in one API's shape and reads
// the answer's text and its prompt and cached token counts.
type parityAPI struct {
	name, path string
	body       func(system string, turns []string) map[string]any
	read       func(t *testing.T, raw []byte) (text string, prompt, cached int)
}

// parityAPIs are chat completions, Messages and Responses: the same
// conversation, the system prompt as the system message, system or
// instructions, and each answer sent back as the API's SDKs send it.
var parityAPIs = []parityAPI{
	{"chat", "/v1/chat/completions",
		func(system string, turns []string) map[string]any {
			msgs := []map[string]any{{"role": "system", "content": system}}
			for i, c := range turns {
				msgs = append(msgs, map[string]any{"role": [2]string{"user", "assistant"}[i%2], "content": c})
			}
			return map[string]any{"model": "vllmsim/tiny", "messages": msgs, "max_tokens": parityMaxTokens}
		},
		func(t *testing.T, raw []byte) (string, int, int) {
			var r struct {
				Choices []struct{ Message struct{ Content string } }
				Usage   struct {
					PromptTokens        int `json:"prompt_tokens"`
					PromptTokensDetails struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				}
			}
			if err := json.Unmarshal(raw, &r); err != nil || len(r.Choices) == 0 {
				t.Fatalf("chat answer %s: %v", raw, err)
			}
			return r.Choices[0].Message.Content, r.Usage.PromptTokens, r.Usage.PromptTokensDetails.CachedTokens
		}},
	{"messages", "/v1/messages",
		func(system string, turns []string) map[string]any {
			var msgs []map[string]any
			for i, c := range turns {
				if i%2 == 0 {
					msgs = append(msgs, map[string]any{"role": "user", "content": c})
				} else {
					msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": c}}})
				}
			}
			return map[string]any{"model": "vllmsim/tiny", "system": system, "messages": msgs, "max_tokens": parityMaxTokens}
		},
		func(t *testing.T, raw []byte) (string, int, int) {
			var r struct {
				Content []struct{ Type, Text string }
				Usage   struct {
					InputTokens          int `json:"input_tokens"`
					CacheReadInputTokens int `json:"cache_read_input_tokens"`
				}
			}
			if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) != 1 {
				t.Fatalf("messages answer %s: %v", raw, err)
			}
			return r.Content[0].Text, r.Usage.InputTokens, r.Usage.CacheReadInputTokens
		}},
	{"responses", "/v1/responses",
		func(system string, turns []string) map[string]any {
			var items []map[string]any
			for i, c := range turns {
				if i%2 == 0 {
					items = append(items, map[string]any{"role": "user", "content": c})
				} else {
					items = append(items, map[string]any{"type": "message", "role": "assistant",
						"content": []any{map[string]any{"type": "output_text", "text": c, "annotations": []any{}}}})
				}
			}
			return map[string]any{"model": "vllmsim/tiny", "instructions": system, "input": items, "max_output_tokens": parityMaxTokens, "store": false}
		},
		func(t *testing.T, raw []byte) (string, int, int) {
			var r struct {
				Output []struct {
					Content []struct{ Text string }
				}
				Usage struct {
					InputTokens        int `json:"input_tokens"`
					InputTokensDetails struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"input_tokens_details"`
				}
			}
			if err := json.Unmarshal(raw, &r); err != nil || len(r.Output) != 1 || len(r.Output[0].Content) != 1 {
				t.Fatalf("responses answer %s: %v", raw, err)
			}
			return r.Output[0].Content[0].Text, r.Usage.InputTokens, r.Usage.InputTokensDetails.CachedTokens
		}},
}

const (
	parityConversations = 12
	parityTurns         = 6
	parityMaxTokens     = 48
)

// TestCacheShareParity sends the same multi-turn conversations (each with
// a long system prompt of its own; every turn sends the whole conversation
// so far, the answers included, and a new question) once as chat
// completions, once as Messages and once as Responses, each to a fresh
// fleet of three vllmsim replicas behind the router with its default
// policy, and compares the share of prompt tokens the replicas report
// cached: Messages and Responses must each be within 2 points of chat, and
// the router's usage counters must hold what the answers said.
// The figures are in docs/routes.md.
func TestCacheShareParity(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 216 requests")
	}
	share := map[string]float64{}
	for _, api := range parityAPIs {
		h := startHarness(t, 3, server.Config{}, vllmsim.Config{})
		systems := make([]string, parityConversations)
		turns := make([][]string, parityConversations)
		for c := range systems {
			systems[c] = fmt.Sprintf("You are assistant %d of the support team. ", c) + strings.Repeat(fmt.Sprintf("Rule %d: answer from the handbook and cite its section. ", c), 30)
		}
		var prompt, cached int
		// Turn by turn across the conversations, as users come back.
		for turn := range parityTurns {
			for c := range systems {
				turns[c] = append(turns[c], fmt.Sprintf("Question %d of conversation %d: what does section %d say?", turn, c, turn*7+c))
				body, _ := json.Marshal(api.body(systems[c], turns[c]))
				status, _, raw := call(t, http.MethodPost, h.base+api.path, "application/json", body, nil)
				if status != http.StatusOK {
					t.Fatalf("%s conversation %d turn %d: status %d, body %s", api.name, c, turn, status, raw)
				}
				text, p, k := api.read(t, raw)
				if text == "" || p <= 0 {
					t.Fatalf("%s conversation %d turn %d: answer %s", api.name, c, turn, raw)
				}
				prompt, cached = prompt+p, cached+k
				turns[c] = append(turns[c], text)
			}
		}
		// The router read the same usage from every answer: its counters
		// hold the figures the client saw. The last exchange ends just
		// after the client has its answer: poll, bounded.
		var rp, rc float64
		for i := 0; i < 100 && (rp != float64(prompt) || rc != float64(cached)); i++ {
			if i > 0 {
				time.Sleep(10 * time.Millisecond)
			}
			ps, cs := routerCounters(t, h.base)
			rp, rc = 0, 0
			for b := range ps {
				rp, rc = rp+ps[b], rc+cs[b]
			}
		}
		if rp != float64(prompt) || rc != float64(cached) {
			t.Errorf("%s: the router counted %.0f prompt tokens, %.0f cached; the answers said %d, %d", api.name, rp, rc, prompt, cached)
		}
		share[api.name] = 100 * float64(cached) / float64(prompt)
		t.Logf("%s: %d of %d prompt tokens cached (%.2f%%)", api.name, cached, prompt, share[api.name])
	}
	for _, name := range []string{"messages", "responses"} {
		if d := math.Abs(share[name] - share["chat"]); d > 2 {
			t.Errorf("%s: %.2f%% of prompt tokens cached, chat %.2f%%: %.2f points apart, want at most 2", name, share[name], share["chat"], d)
		}
	}
}
