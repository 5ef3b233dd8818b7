package backends

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Engine is the inference server behind a backend. Each speaks the OpenAI
// API; they differ in their load metrics, how they state their KV-cache
// capacity and how they report cached prompt tokens (docs/backends.md has
// the table and the engine source each name was checked against).
type Engine uint8

const (
	// EngineAuto means "find out": the engine is detected from the metric
	// names on /metrics, or from /props (llama.cpp) or /get_server_info
	// (SGLang) when /metrics is off.
	EngineAuto Engine = iota
	// EngineVLLM is vLLM (and backends/vllmsim): vllm: metrics.
	EngineVLLM
	// EngineSGLang is SGLang: sglang: metrics (--enable-metrics),
	// capacity from /get_server_info.
	EngineSGLang
	// EngineLlamaCpp is llama.cpp's llama-server: llamacpp: metrics
	// (--metrics), slots and context from /props.
	EngineLlamaCpp
)

var engineNames = [...]string{EngineAuto: "auto", EngineVLLM: "vllm", EngineSGLang: "sglang", EngineLlamaCpp: "llamacpp"}

func (e Engine) String() string {
	if int(e) < len(engineNames) {
		return engineNames[e]
	}
	return fmt.Sprintf("Engine(%d)", uint8(e))
}

// ParseEngine reads an engine name: auto, vllm, sglang or llamacpp (any
// case; "" is auto).
func ParseEngine(s string) (Engine, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	switch name {
	case "":
		return EngineAuto, nil
	case "llama.cpp":
		name = "llamacpp"
	}
	if i := slices.Index(engineNames[:], name); i >= 0 {
		return Engine(i), nil
	}
	return EngineAuto, fmt.Errorf("engine %q is not auto, vllm, sglang or llamacpp", s)
}

// SplitEngine separates a backend spec's optional engine prefix, as in
// "sglang+http://10.0.0.5:30000" or "llamacpp+dns://llama.svc:8080", from
// the spec itself. A spec without a prefix is EngineAuto. Host names cannot
// hold '+' and prefixgate's schemes (http, https, dns, srv, file) have none,
// so a '+' before any "://" can only end a prefix. A role prefix
// (SplitSpec) is read and dropped with it.
func SplitEngine(spec string) (Engine, string, error) {
	_, e, rest, err := SplitSpec(spec)
	return e, rest, err
}

// Engine returns the backend's engine: the configured one, else the one
// detected at the last scrape, else EngineAuto (not known yet).
func (b *Backend) Engine() Engine {
	if b.configured != EngineAuto {
		return b.configured
	}
	return Engine(b.detected.Load())
}

// CacheTokens is the backend's prefix-cache capacity in tokens, as its
// engine states it: vLLM's num_gpu_blocks × block_size
// (vllm:cache_config_info), SGLang's max_total_num_tokens, llama.cpp's
// per-slot n_ctx × total_slots (/props). 0 while unknown.
func (b *Backend) CacheTokens() int { return int(b.cacheTokens.Load()) }

// detectFromMetricName names the engine whose prefix a metric carries.
func detectFromMetricName(name []byte) Engine {
	switch {
	case len(name) > 5 && string(name[:5]) == "vllm:":
		return EngineVLLM
	case len(name) > 7 && string(name[:7]) == "sglang:":
		return EngineSGLang
	case len(name) > 9 && string(name[:9]) == "llamacpp:":
		return EngineLlamaCpp
	}
	return EngineAuto
}

// engineInfo is what an engine's own info endpoint says.
type engineInfo struct {
	engine Engine
	// cacheTokens is the KV-cache capacity in tokens; 0 when not stated.
	cacheTokens int
	// cacheReport is SGLang's --enable-cache-report: with it on, a usage
	// without prompt_tokens_details means no cached tokens rather than
	// "not reported".
	cacheReport bool
	// bootstrapPort is SGLang's --disaggregation-bootstrap-port when it
	// runs disaggregated (0: not stated).
	bootstrapPort int
}

// infoRefresh is how often a known engine's info endpoint is re-read for
// its capacity (it changes only when the engine restarts with other
// settings), and how often an unknown backend is asked who it is.
const infoRefresh = 30 * time.Second

// fetchInfo asks one engine's info endpoint: /props for llama.cpp,
// /get_server_info (then /server_info, its newer name) for SGLang. For
// EngineAuto, an engine that published no recognizable /metrics, it asks
// who it is: llama-server answers /props, SGLang /get_server_info.
func (p *Pool) fetchInfo(ctx context.Context, b *Backend, e Engine) (engineInfo, error) {
	switch e {
	case EngineLlamaCpp:
		raw, err := p.getJSON(ctx, b, "/props")
		if err != nil {
			return engineInfo{}, err
		}
		return parseLlamaCppProps(raw)
	case EngineSGLang:
		raw, err := p.getJSON(ctx, b, "/get_server_info")
		if err != nil {
			var err2 error
			if raw, err2 = p.getJSON(ctx, b, "/server_info"); err2 != nil {
				return engineInfo{}, err
			}
		}
		return parseSGLangServerInfo(raw)
	case EngineAuto:
		info, err := p.fetchInfo(ctx, b, EngineLlamaCpp)
		if err == nil {
			return info, nil
		}
		info, err2 := p.fetchInfo(ctx, b, EngineSGLang)
		if err2 == nil {
			return info, nil
		}
		return engineInfo{}, fmt.Errorf("engine not recognized: %w; %w", err, err2)
	}
	return engineInfo{}, fmt.Errorf("engine %s has no info endpoint", e)
}

// parseLlamaCppProps reads llama-server's /props: total_slots and the
// per-slot context default_generation_settings.n_ctx
// (tools/server/server-context.cpp in llama.cpp). With a unified KV cache
// (--kv-unified, llama-server's default when -np is left to auto) each
// slot's n_ctx is the whole cache and the product overstates it; /props
// does not say which layout runs (docs/backends.md).
func parseLlamaCppProps(raw []byte) (engineInfo, error) {
	r := gjson.GetManyBytes(raw, "total_slots", "default_generation_settings.n_ctx")
	if !r[0].Exists() && !r[1].Exists() {
		return engineInfo{}, fmt.Errorf("/props has neither total_slots nor default_generation_settings.n_ctx: not llama.cpp")
	}
	info := engineInfo{engine: EngineLlamaCpp}
	slots, nctx := r[0].Int(), r[1].Int()
	if slots < 1 {
		slots = 1
	}
	if nctx > 0 && nctx <= 1<<32 && slots <= 1<<16 {
		info.cacheTokens = int(nctx * slots)
	}
	return info, nil
}

// parseSGLangServerInfo reads SGLang's /get_server_info: the server args
// (dp_size, enable_cache_report) merged with the first scheduler's
// max_total_num_tokens (python/sglang/srt/entrypoints/http_server.py in
// sglang).
func parseSGLangServerInfo(raw []byte) (engineInfo, error) {
	r := gjson.GetManyBytes(raw, "max_total_num_tokens", "internal_states.0.max_total_num_tokens", "enable_cache_report", "model_path", "dp_size",
		"disaggregation_mode", "disaggregation_bootstrap_port")
	if !r[0].Exists() && !r[1].Exists() && !r[3].Exists() {
		return engineInfo{}, fmt.Errorf("/get_server_info has neither max_total_num_tokens nor model_path: not SGLang")
	}
	info := engineInfo{engine: EngineSGLang, cacheReport: r[2].Bool()}
	if m := r[5].String(); (m == "prefill" || m == "decode") && r[6].Int() > 0 && r[6].Int() <= 65535 {
		info.bootstrapPort = int(r[6].Int())
	}
	n := r[0].Int()
	if n <= 0 {
		n = r[1].Int()
	}
	// max_total_num_tokens is one scheduler's KV pool; each data-parallel
	// rank has its own.
	if dp := r[4].Int(); dp > 1 && dp <= 1024 {
		n *= dp
	}
	if n > 0 && n <= 1<<40 {
		info.cacheTokens = int(n)
	}
	return info, nil
}

// getJSON GETs path and returns its body (at most 4 MiB) when it is a JSON
// object.
func (p *Pool) getJSON(ctx context.Context, b *Backend, path string) ([]byte, error) {
	raw, err := p.get(ctx, b, path, 4<<20)
	if err != nil {
		return nil, err
	}
	if !gjson.ValidBytes(raw) || !gjson.ParseBytes(raw).IsObject() {
		return nil, fmt.Errorf("%s did not answer a JSON object", path)
	}
	return raw, nil
}
