package server

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/normalize"
)

// chatExchange is an exchange for a chat request keyed with blocks, as the
// prefix-index policy keys it.
func chatExchange(t *testing.T) *exchange {
	t.Helper()
	_, info, err := normalize.Normalize(nil, []byte(`{"model":"m","messages":[{"role":"user","content":"tell me a story"}]}`),
		normalize.Options{}, normalize.KeyOptions{Mode: normalize.ModeChat, Blocks: true})
	if err != nil {
		t.Fatal(err)
	}
	return &exchange{info: info, b: &backends.Backend{}, usage: backends.UnknownUsage}
}

// TestAnswerStreamReadsEachEventOnce feeds an event stream in reads of
// every size, cutting lines anywhere: the text and usage read are those of
// the whole stream, and the answer's blocks are those of the plain answer
// with the same text.
func TestAnswerStreamReadsEachEventOnce(t *testing.T) {
	var stream, want strings.Builder
	for i := range 300 {
		piece := fmt.Sprintf("word %d, \\\"quoted\\\" é; ", i)
		fmt.Fprintf(&stream, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},\"finish_reason\":null}]}\r\n\r\n", piece)
		want.WriteString(strings.ReplaceAll(piece, `\"`, `"`))
		if i%50 == 0 {
			// Another choice's chunk and a comment line: not part of choice 0.
			stream.WriteString("data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\n\n: keep-alive\n\n")
		}
	}
	stream.WriteString("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":812,\"prompt_tokens_details\":{\"cached_tokens\":768}}}\n\ndata: [DONE]\n\n")
	raw := []byte(stream.String())
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 20 {
		x := chatExchange(t)
		as := x.readStream()
		for rest := raw; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(1<<(round%12+1)))
			as.feed(rest[:n])
			rest = rest[n:]
		}
		if got := string(as.text); got != want.String() {
			t.Fatalf("round %d: text %q..., want %q...", round, got[:min(len(got), 80)], want.String()[:80])
		}
		as.finish()
		as.put()
		if x.usage != (backends.Usage{PromptTokens: 812, CachedTokens: 768}) {
			t.Fatalf("round %d: usage %+v", round, x.usage)
		}
		plain := x.info.AnswerBlocks([]byte(want.String()))
		if len(plain) <= len(x.info.Blocks) || !slices.Equal(x.answer, plain) {
			t.Fatalf("round %d: streamed answer's blocks (%d) differ from the plain answer's (%d)", round, len(x.answer), len(plain))
		}
	}
}

// TestAnswerStreamBounds: an answer past maxAnswerBytes is not learned, and
// an event line past maxEventBytes is skipped without holding it, while the
// events after it are still read.
func TestAnswerStreamBounds(t *testing.T) {
	x := chatExchange(t)
	as := x.readStream()
	chunk := []byte(`data: {"choices":[{"delta":{"content":"` + strings.Repeat("a", 4096) + `"}}]}` + "\n\n")
	for range maxAnswerBytes/4096 + 1 {
		as.feed(chunk)
	}
	as.finish()
	if x.answer != nil || !as.over || len(as.text) != 0 {
		t.Fatalf("answer over the limit: learned %d blocks, over %v, kept %d bytes", len(x.answer), as.over, len(as.text))
	}
	as.put()

	x = chatExchange(t)
	as = x.readStream()
	huge := bytes.Repeat([]byte("x"), 64<<10)
	as.feed([]byte(`data: {"choices":[{"delta":{"content":"`))
	for range maxEventBytes/len(huge) + 1 {
		as.feed(huge)
	}
	if !as.skip || len(as.line) != 0 {
		t.Fatalf("line past the limit: skip %v, holding %d bytes", as.skip, len(as.line))
	}
	as.feed([]byte("\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"after\"}}],\"usage\":{\"prompt_tokens\":5}}\n\n"))
	if string(as.text) != "after" || x.usage.PromptTokens != 5 {
		t.Fatalf("after the long line: text %q, usage %+v; want the next event read", as.text, x.usage)
	}
	as.put()
}

// BenchmarkAnswerStream reads a 400-event chat stream (about 60 KiB) with
// its final usage chunk as the REST relay does, in 32 KiB reads: the
// per-stream cost of reading every event once, text included (learn, the
// prefix-index policy), or of finding the usage chunk alone (usage-only,
// the other policies).
func BenchmarkAnswerStream(b *testing.B) {
	var sb strings.Builder
	for i := range 400 {
		fmt.Fprintf(&sb, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token %d\"},\"finish_reason\":null}]}\n\n", i)
	}
	sb.WriteString("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":812,\"prompt_tokens_details\":{\"cached_tokens\":768}}}\n\ndata: [DONE]\n\n")
	raw := []byte(sb.String())
	for _, learn := range []bool{true, false} {
		name := "learn"
		if !learn {
			name = "usage-only"
		}
		b.Run(name, func(b *testing.B) {
			_, info, err := normalize.Normalize(nil, []byte(`{"model":"m","messages":[{"role":"user","content":"tell me a story"}]}`),
				normalize.Options{}, normalize.KeyOptions{Mode: normalize.ModeChat, Blocks: learn})
			if err != nil {
				b.Fatal(err)
			}
			x := &exchange{info: info, b: &backends.Backend{}}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				x.usage, x.answer = backends.UnknownUsage, nil
				as := x.readStream()
				for rest := raw; len(rest) > 0; {
					n := min(len(rest), 32<<10)
					as.feed(rest[:n])
					rest = rest[n:]
				}
				as.finish()
				as.put()
				if x.usage.CachedTokens != 768 || (learn && len(x.answer) <= len(info.Blocks)) {
					b.Fatal(x.usage, len(x.answer))
				}
			}
		})
	}
}
