package epp

import "github.com/prometheus/client_golang/prometheus"

// metrics are the picker's own series, beside the server's (pool, router,
// normalizer); docs/epp.md lists them.
type metrics struct {
	registry          *prometheus.Registry
	picks             *prometheus.CounterVec
	refusals          *prometheus.CounterVec
	servedCorrections prometheus.Counter
	promptTokens      prometheus.Counter
	cachedTokens      prometheus.Counter
	learnedIDs        prometheus.Counter
	splits            *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		picks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_epp_picks_total", Help: "Endpoints picked for the gateway, by routing decision.",
		}, []string{"decision"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_epp_immediate_responses_total", Help: "Requests answered by the picker itself (429, 503, 4xx), by status.",
		}, []string{"code"}),
		servedCorrections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prefixgate_epp_served_corrections_total", Help: "Responses whose served endpoint differed from the pick.",
		}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prefixgate_epp_prompt_tokens_total", Help: "Prompt tokens reported in the usage of responses through the gateway.",
		}),
		cachedTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prefixgate_epp_cached_tokens_total", Help: "Cached prompt tokens reported in the usage of responses through the gateway.",
		}),
		learnedIDs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prefixgate_epp_response_ids_learned_total", Help: "Responses ids learned from answers through the gateway and remembered with their endpoint.",
		}),
		splits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_epp_split_decisions_total", Help: "Generation requests of a disaggregated fleet, by how they run (split or aggregated) and why.",
		}, []string{"mode", "reason"}),
	}
	m.registry.MustRegister(m.picks, m.refusals, m.servedCorrections, m.promptTokens, m.cachedTokens, m.learnedIDs, m.splits)
	return m
}

// Gatherer is the picker's Prometheus registry.
func (p *Picker) Gatherer() prometheus.Gatherer { return p.metrics.registry }
