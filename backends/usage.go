package backends

import (
	"github.com/tidwall/gjson"
)

// Usage is one response's prompt-token accounting as its engine reported
// it; -1 in a field means the response did not say.
type Usage struct {
	// PromptTokens is usage.prompt_tokens (usage.input_tokens in the
	// Responses and Messages APIs, meta_info.prompt_tokens in SGLang's
	// native answers).
	PromptTokens int
	// CachedTokens is how many of them the engine's prefix cache held:
	// usage.prompt_tokens_details.cached_tokens (vLLM with
	// --enable-prompt-tokens-details, llama.cpp always, SGLang with
	// --enable-cache-report), usage.input_tokens_details.cached_tokens
	// (Responses), usage.cache_read_input_tokens (Messages) or SGLang's
	// meta_info.cached_tokens.
	CachedTokens int
}

// UnknownUsage is a response that reported nothing.
var UnknownUsage = Usage{PromptTokens: -1, CachedTokens: -1}

// parseUsage reads the usage of one OpenAI response body or stream chunk,
// and whether it stated usage.prompt_tokens_details.cached_tokens. Only the
// usage (or SGLang's meta_info) object is looked at; gjson skips the rest
// without building anything. missingIsZero says that a usage without
// prompt_tokens_details means no cached tokens rather than "not reported":
// SGLang with --enable-cache-report leaves the details out when nothing was
// cached (python/sglang/srt/entrypoints/openai/usage_processor.py).
func parseUsage(raw []byte, missingIsZero bool) (u Usage, stated bool) {
	obj := gjson.GetBytes(raw, "usage")
	if !obj.IsObject() {
		obj = gjson.GetBytes(raw, "meta_info") // SGLang's native /generate answer
		if !obj.IsObject() {
			return UnknownUsage, false
		}
		missingIsZero = false // meta_info states cached_tokens whenever it knows
	}
	return parseUsageObject(obj, missingIsZero)
}

// parseUsageObject reads a usage (or meta_info) object; see parseUsage.
func parseUsageObject(obj gjson.Result, missingIsZero bool) (u Usage, stated bool) {
	u = UnknownUsage
	// One walk over the object's members, the first of each name counting
	// as gjson.Get's would; GetMany walked it once per path and allocated.
	// The Responses API names the prompt input_tokens and its details
	// input_tokens_details; Anthropic's Messages API states the cached
	// part as cache_read_input_tokens, and vLLM's Messages path counts
	// input_tokens as the whole prompt, cached part included.
	var r [4]gjson.Result // prompt_tokens, details.cached_tokens, cached_tokens, details
	obj.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens", "input_tokens":
			if !r[0].Exists() {
				r[0] = v
			}
		case "cached_tokens":
			if !r[2].Exists() {
				r[2] = v
			}
		case "prompt_tokens_details", "input_tokens_details":
			if !r[3].Exists() {
				r[3] = v
				if v.IsObject() && !r[1].Exists() {
					r[1] = v.Get("cached_tokens")
				}
			}
		case "cache_read_input_tokens":
			if !r[1].Exists() {
				r[1] = v
			}
		}
		return true
	})
	if n, ok := count(r[0]); ok {
		u.PromptTokens = n
	}
	switch n, ok := count(r[1]); {
	case ok:
		u.CachedTokens, stated = n, true
	case r[2].Exists():
		if n, ok := count(r[2]); ok {
			u.CachedTokens = n
		}
	case missingIsZero && u.PromptTokens >= 0 && (!r[3].Exists() || r[3].Type == gjson.Null):
		u.CachedTokens = 0
	}
	if u.CachedTokens > u.PromptTokens && u.PromptTokens >= 0 {
		// A cache cannot hold more of the prompt than the prompt: the
		// figure is wrong, and a wrong hit rate is worse than none.
		u.CachedTokens = -1
	}
	return u, stated
}

// count reads a non-negative integer token count.
func count(r gjson.Result) (int, bool) {
	if r.Type != gjson.Number {
		return 0, false
	}
	n := r.Int()
	if n < 0 || n > 1<<40 || float64(n) != r.Num {
		return 0, false
	}
	return int(n), true
}

// ParseUsage reads a response's usage the way b's engine writes it. vLLM
// (--enable-prompt-tokens-details) and SGLang (--enable-cache-report) both
// leave prompt_tokens_details out when nothing was cached
// (vllm/entrypoints/openai/serving_chat.py, serving_completion.py;
// SGLang's usage_processor.py), and out altogether when the switch is off.
// So a backend that has stated cached_tokens once, or an SGLang whose
// server info shows the switch on, reports a missing figure as 0; before
// that it is "not reported". (An engine restarted with the switch off
// would then count as 0 cached until its backend is replaced.)
func (b *Backend) ParseUsage(raw []byte) Usage {
	u, stated := parseUsage(raw, b.reportsCached.Load() || (b.Engine() == EngineSGLang && b.cacheReport.Load()))
	if stated && !b.reportsCached.Load() {
		b.reportsCached.Store(true)
	}
	return u
}

// EventUsage reads the usage of one stream event (or answer) the way b's
// engine writes it, as ParseUsage does, from the event's top-level usage
// and meta_info members that the caller's own walk of the event found (raw
// JSON, nil when absent): a relay that reads each event once for its text
// hands over what it found rather than have the event scanned again.
func (b *Backend) EventUsage(usage, metaInfo []byte) Usage {
	missingIsZero := b.reportsCached.Load() || (b.Engine() == EngineSGLang && b.cacheReport.Load())
	obj := gjson.ParseBytes(usage)
	if !obj.IsObject() {
		obj = gjson.ParseBytes(metaInfo)
		if !obj.IsObject() {
			return UnknownUsage
		}
		missingIsZero = false
	}
	u, stated := parseUsageObject(obj, missingIsZero)
	if stated && !b.reportsCached.Load() {
		b.reportsCached.Store(true)
	}
	return u
}
