package backends_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/backends"
)

// benchAnswer is a chat answer of about size bytes whose usage object sits
// at the end, as in vLLM's.
func benchAnswer(size int) []byte {
	var content strings.Builder
	for i := 0; content.Len() < size; i++ {
		fmt.Fprintf(&content, "token %d of a long answer, with \\\"quotes\\\" and \\\\ escapes; ", i)
	}
	return []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		content.String() + `"},"finish_reason":"length"}],"usage":{"prompt_tokens":812,"total_tokens":9000,"completion_tokens":8188,"prompt_tokens_details":{"cached_tokens":768}}}`)
}

// BenchmarkUsage compares reading the usage as the server does (gjson on
// the usage object) with decoding the whole answer with encoding/json.
func BenchmarkUsage(b *testing.B) {
	raw := benchAnswer(64 << 10)
	be := &backends.Backend{}
	small := benchAnswer(2 << 10)
	b.Run("gjson-usage-2KiB", func(b *testing.B) {
		b.SetBytes(int64(len(small)))
		for b.Loop() {
			if u := be.ParseUsage(small); u.CachedTokens != 768 {
				b.Fatal(u)
			}
		}
	})
	b.Run("gjson-usage", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if u := be.ParseUsage(raw); u.CachedTokens != 768 {
				b.Fatal(u)
			}
		}
	})
	b.Run("json-unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var v struct {
				Usage struct {
					PromptTokens        int `json:"prompt_tokens"`
					PromptTokensDetails struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(raw, &v); err != nil || v.Usage.PromptTokensDetails.CachedTokens != 768 {
				b.Fatal(err)
			}
		}
	})
	final := gjson.Parse(`{"choices":[],"usage":{"prompt_tokens":812,"prompt_tokens_details":{"cached_tokens":768}}}`)
	usage := []byte(final.Get("usage").Raw)
	b.Run("stream-event-members", func(b *testing.B) {
		for b.Loop() {
			if u := be.EventUsage(usage, nil); u.CachedTokens != 768 {
				b.Fatal(u)
			}
		}
	})
}
