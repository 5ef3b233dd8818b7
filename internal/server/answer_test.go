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
		`{"choices":[{"text":"first"}],"choices":[{"text":"second"}]}`,
		`{"choices":"not an array","usage":5}`,
		`[]`,
		`{}`,
	}
	for _, c := range chunks {
		for _, path := range []string{"delta.content", "message.content", "text"} {
			got := parseAnswer([]byte(c), path)
			j := gjson.Parse(c)
			want := answer{text: j.Get("choices.0." + path).String(), finishReason: j.Get("choices.0.finish_reason").String(), usage: usageProto(j.Get("usage"))}
			if got.text != want.text || got.finishReason != want.finishReason || !proto.Equal(got.usage, want.usage) {
				t.Errorf("%s at %s: got %+v, want %+v", c, path, got, want)
			}
		}
	}
}
