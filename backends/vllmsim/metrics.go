package vllmsim

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// handleMetrics serves GET /metrics in the Prometheus text format with
// vLLM's metric names and the label model_name.
func (r *Replica) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	s := r.Stats()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	WriteMetrics(w, r.cfg.Model, s)
}

// WriteMetrics writes s in the Prometheus text format under vLLM's metric
// names, labelled model_name=model.
func WriteMetrics(w io.Writer, model string, s Stats) {
	lbl := `model_name="` + escapeLabel(model) + `"`
	metric := func(name, typ, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %s\n", name, help, name, typ, name, lbl, fmtFloat(v))
	}
	metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", float64(s.Running))
	metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", float64(s.Waiting))
	metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", s.KVCacheUsage)
	metric("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", float64(s.PrefixCacheQueries))
	metric("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", float64(s.PrefixCacheHits))
	metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", float64(s.PromptTokens))
	metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", float64(s.GenerationTokens))
	metric("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", float64(s.Preemptions))
	name := "vllm:time_to_first_token_seconds"
	fmt.Fprintf(w, "# HELP %s Histogram of time to first token in seconds.\n# TYPE %s histogram\n", name, name)
	var cum uint64
	for i, b := range s.TTFT.Bounds {
		cum += s.TTFT.Counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%s\",%s} %d\n", name, fmtFloat(b), lbl, cum)
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\",%s} %d\n", name, lbl, s.TTFT.Count)
	fmt.Fprintf(w, "%s_sum{%s} %s\n", name, lbl, fmtFloat(s.TTFT.Sum))
	fmt.Fprintf(w, "%s_count{%s} %d\n", name, lbl, s.TTFT.Count)
}

func fmtFloat(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eIN") {
		s += ".0"
	}
	return s
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
