package server

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/normalize"
)

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkRelayPlainAnswer relays a vLLM chat completion of known length
// for a request keyed with blocks: the copy to the client plus reading its
// usage and first choice's text.
func BenchmarkRelayPlainAnswer(b *testing.B) {
	_, info, err := normalize.Normalize(nil, []byte(`{"model":"m","messages":[{"role":"user","content":"tell me a story"}]}`),
		normalize.Options{}, normalize.KeyOptions{Mode: normalize.ModeChat, Blocks: true})
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(`{"id":"chatcmpl-8f1c","object":"chat.completion","created":1764568800,"model":"m",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Once upon a time a router learned every answer it relayed, and the next turn found its way home.","refusal":null,"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],` +
		`"usage":{"prompt_tokens":812,"total_tokens":840,"completion_tokens":28,"prompt_tokens_details":{"cached_tokens":768}},"prompt_logprobs":null}`)
	w := &discardWriter{h: http.Header{}}
	r := bytes.NewReader(answer)
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(answer)
		x := &exchange{info: info, b: &backends.Backend{}, usage: backends.UnknownUsage,
			resp: &http.Response{StatusCode: 200, ContentLength: int64(len(answer)), Body: io.NopCloser(r)}}
		if err := x.relay(w, false); err != nil {
			b.Fatal(err)
		}
		if x.usage.CachedTokens != 768 || len(x.answer) <= len(info.Blocks) {
			b.Fatalf("usage %+v, %d answer blocks", x.usage, len(x.answer))
		}
	}
}
