package backends

import (
	"strings"
	"testing"
)

// TestParseMetrics reads /metrics texts of each engine, and junk.
func TestParseMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       LoadSignals
	}{
		{"empty", "", LoadSignals{PrefixHitRate: -1}},
		{"not vllm", "# HELP x y\nhttp_requests_total{code=\"200\"} 5\nup 1\n", LoadSignals{PrefixHitRate: -1}},
		{"vllm two engines", `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:num_requests_running{engine="1",model_name="m"} 2
vllm:num_requests_waiting{model_name="m"} 7 1712345678000
vllm:kv_cache_usage_perc{engine="0"} 0.25
vllm:kv_cache_usage_perc{engine="1"} 0.5
vllm:prefix_cache_queries_total{model_name="a } b \" c"} 1e3
vllm:prefix_cache_hits_total 250
`, LoadSignals{Known: true, Engine: EngineVLLM, Running: 5, Waiting: 7, KVCacheUsage: 0.5, PrefixCacheQueries: 1000, PrefixCacheHits: 250, PrefixHitRate: -1}},
		{"vllm capacity over two engines", `vllm:cache_config_info{engine="0",note="a \"quoted\", {braced} value",num_gpu_blocks="100",block_size="16"} 1
vllm:cache_config_info{block_size="32",engine="1",num_gpu_blocks="10"} 1
vllm:cache_config_info{block_size="16",engine="2",num_gpu_blocks="None"} 1
vllm:num_requests_running 1
vllm:num_requests_running{engine="1"} -4
vllm:num_requests_waiting +Inf
vllm:kv_cache_usage_perc Inf
`, LoadSignals{Known: true, Engine: EngineVLLM, Running: 1, CacheTokens: 100*16 + 10*32, PrefixHitRate: -1}},
		{"sglang over two dp ranks", `sglang:num_running_reqs{dp_rank="0"} 2
sglang:num_running_reqs{dp_rank="1"} 3
sglang:num_queue_reqs{dp_rank="0"} 1
sglang:token_usage{dp_rank="0"} 0.5
sglang:token_usage{dp_rank="1"} 0.25
sglang:cache_hit_rate{dp_rank="0"} 0.5
sglang:cache_hit_rate{dp_rank="1"} 1.5
vllm:num_requests_running 9
`, LoadSignals{Known: true, Engine: EngineSGLang, Running: 5, Waiting: 1, KVCacheUsage: 0.5, PrefixHitRate: 1}},
		{"llamacpp without the cached counter", "llamacpp:prompt_tokens_total 10\nllamacpp:requests_processing 1\n",
			LoadSignals{Known: true, Engine: EngineLlamaCpp, Running: 1, PrefixHitRate: -1}},
		{"older name and junk", "vllm:gpu_cache_usage_perc 0.75\nvllm:num_requests_running{broken 3\nvllm:num_requests_waiting NaN\nvllm:num_requests_waiting abc\n",
			LoadSignals{Known: true, Engine: EngineVLLM, KVCacheUsage: 0.75, PrefixHitRate: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMetrics(strings.NewReader(tc.text), EngineAuto)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add("vllm:num_requests_running{a=\"}\"} 1 2\n")
	f.Add("# x\nvllm:kv_cache_usage_perc +Inf\n")
	f.Add("vllm:cache_config_info{block_size=\"16\",x=\"\\\"\",num_gpu_blocks=\"2\"} 1\n")
	f.Add("llamacpp:prompt_tokens_cached_total 5\nsglang:cache_hit_rate 2\n")
	f.Fuzz(func(t *testing.T, s string) {
		parseMetrics(strings.NewReader(s), EngineAuto)
	})
}
