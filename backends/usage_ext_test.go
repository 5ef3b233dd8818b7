package backends_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/backends"
)

// engineBackend is a pool backend of the given engine whose info endpoint
// (SGLang's) has been read once.
func engineBackend(t *testing.T, prefix string, eng *fakeEngine) *backends.Backend {
	t.Helper()
	srv := eng.start(t)
	p, err := backends.NewPool([]string{prefix + srv.URL}, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.ScrapeAll(context.Background())
	return p.Backends()[0]
}

// TestUsageShapes reads each engine's answer shapes, unary and streamed,
// from hand-written fixtures in the shape of the engines' sources.
func TestUsageShapes(t *testing.T) {
	info := fixture(t, "sglang_server_info.json")
	noReport := strings.Replace(info, `"enable_cache_report":true`, `"enable_cache_report":false`, 1)
	if noReport == info {
		t.Fatal("fixture lost enable_cache_report")
	}
	vllm := engineBackend(t, "vllm+", &fakeEngine{})
	vllmFresh := engineBackend(t, "vllm+", &fakeEngine{})
	llama := engineBackend(t, "", &fakeEngine{props: fixture(t, "llamacpp_props.json")})
	sgl := engineBackend(t, "", &fakeEngine{serverInfo: info})
	sglNoReport := engineBackend(t, "sglang+", &fakeEngine{serverInfo: noReport})
	if llama.Engine() != backends.EngineLlamaCpp || sgl.Engine() != backends.EngineSGLang {
		t.Fatalf("detection: %v %v", llama.Engine(), sgl.Engine())
	}
	hit := backends.Usage{PromptTokens: 812, CachedTokens: 768}
	for _, tc := range []struct {
		name    string
		b       *backends.Backend
		fixture string
		want    backends.Usage
	}{
		{"vllm without --enable-prompt-tokens-details", vllmFresh, "vllm_chat_no_details.json", backends.Usage{PromptTokens: 812, CachedTokens: -1}},
		{"vllm chat", vllm, "vllm_chat.json", hit},
		// Once the backend has stated cached_tokens, a missing figure is
		// vLLM leaving out a zero.
		{"vllm nothing cached after a stated figure", vllm, "vllm_chat_no_details.json", backends.Usage{PromptTokens: 812, CachedTokens: 0}},
		{"vllm stream", vllm, "vllm_stream.sse", hit},
		{"vllm responses", vllm, "vllm_responses.json", hit},
		{"vllm messages", vllmFresh, "vllm_messages.json", hit},
		{"sglang chat", sgl, "sglang_chat.json", hit},
		{"sglang nothing cached, --enable-cache-report", sgl, "sglang_chat_nothing_cached.json", backends.Usage{PromptTokens: 812, CachedTokens: 0}},
		{"sglang nothing cached, no cache report", sglNoReport, "sglang_chat_nothing_cached.json", backends.Usage{PromptTokens: 812, CachedTokens: -1}},
		{"sglang native generate", sglNoReport, "sglang_generate.json", hit},
		{"sglang stream", sgl, "sglang_stream.sse", hit},
		{"llamacpp chat", llama, "llamacpp_chat.json", hit},
		{"llamacpp stream", llama, "llamacpp_stream.sse", hit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(fixture(t, tc.fixture))
			var got backends.Usage
			if strings.HasSuffix(tc.fixture, ".sse") {
				got = streamUsage(tc.b, raw)
			} else {
				got = tc.b.ParseUsage(raw)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// streamUsage reads a stream as the server's relay does: each event once,
// its usage and meta_info members handed to EventUsage; the last event
// that says something wins.
func streamUsage(b *backends.Backend, raw []byte) backends.Usage {
	u := backends.UnknownUsage
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:")
		if !ok || strings.TrimSpace(data) == "[DONE]" {
			continue
		}
		ev := gjson.Parse(data)
		if e := b.EventUsage([]byte(ev.Get("usage").Raw), []byte(ev.Get("meta_info").Raw)); e.PromptTokens >= 0 || e.CachedTokens >= 0 {
			u = e
		}
	}
	return u
}

func FuzzEventUsage(f *testing.F) {
	f.Add([]byte(`{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}`), []byte(nil))
	f.Add([]byte(`null`), []byte(`{"prompt_tokens":3,"cached_tokens":9}`))
	b := &backends.Backend{}
	f.Fuzz(func(t *testing.T, usage, meta []byte) {
		u := b.EventUsage(usage, meta)
		if u.CachedTokens > u.PromptTokens && u.PromptTokens >= 0 {
			t.Fatalf("cached %d > prompt %d", u.CachedTokens, u.PromptTokens)
		}
		if p := b.ParseUsage([]byte(`{"usage":` + string(usage) + `}`)); gjson.ValidBytes(usage) && gjson.ParseBytes(usage).IsObject() && p != u {
			t.Fatalf("EventUsage %+v, ParseUsage of the same usage %+v", u, p)
		}
	})
}
