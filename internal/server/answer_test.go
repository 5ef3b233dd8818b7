package server

import (
	"testing"

	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/proto"
)

// TestParseAnswerMatchesPaths: the one-walk reader gives what a gjson.Get
// per field gives, on answers, chunks and odd shapes.
func TestParseAnswerMatchesPaths(t *testing.T) {
	chunks := []string{
		`{"id":"c","choices":[{"index":0,"delta":{"content":"he\"llo"},"finish_reason":null}]}`,
		`{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":8}}}`,
		`{"choices":[],"usage":{"prompt_tokens":1}}`,
		`{"usage":null,"choices":[{"message":{"content":"x"},"text":"t","finish_reason":"length"}]}`,
		`{"choices":[{"message":{"content":null,"tool_calls":[]},"delta":{"content":null}}]}`,
		`{"choices":[{"text":"first"}],"choices":[{"text":"second"}]}`,
		`{"choices":"not an array","usage":5}`,
		`{"choices":[{"index":1,"delta":{"content":"second choice"}}],"meta_info":{"prompt_tokens":4,"cached_tokens":2}}`,
		`[]`,
		`{}`,
	}
	for _, c := range chunks {
		for _, path := range []string{"delta.content", "message.content", "text"} {
			got := parseAnswer([]byte(c), path)
			j := gjson.Parse(c)
			tx := j.Get("choices.0." + path)
			want := answer{text: tx.String(), textSeen: tx.Type == gjson.String || (tx.Type == gjson.Null && tx.Exists()), finishReason: j.Get("choices.0.finish_reason").String(),
				index: j.Get("choices.0.index").Int(), usage: j.Get("usage"), metaInfo: j.Get("meta_info")}
			if got.text != want.text || got.textSeen != want.textSeen || got.finishReason != want.finishReason || got.index != want.index ||
				!proto.Equal(usageProto(got.usage), usageProto(want.usage)) || got.usage.Raw != want.usage.Raw || got.metaInfo.Raw != want.metaInfo.Raw {
				t.Errorf("%s at %s: got %+v, want %+v", c, path, got, want)
			}
		}
	}
}
