package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pdMetrics are disaggregation's series, beside the request series that
// count a split request once (docs/metrics.md).
type pdMetrics struct {
	requests       *prometheus.CounterVec
	legs           *prometheus.CounterVec
	prefillSeconds *prometheus.HistogramVec
}

func newPDMetrics(reg prometheus.Registerer, s *Server) *pdMetrics {
	m := &pdMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_disagg_requests_total",
			Help: "Requests of a disaggregated fleet's generation paths, by how they ran (split or aggregated) and why.",
		}, []string{"mode", "reason"}),
		legs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_disagg_legs_total",
			Help: "Legs of split requests, by leg (prefill or decode), backend and outcome (ok, error, canceled).",
		}, []string{"leg", "backend", "outcome"}),
		prefillSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prefixgate_disagg_prefill_seconds",
			Help:    "Time from sending a prefill leg to its whole answer, by prefill backend.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"backend"}),
	}
	reg.MustRegister(m.requests, m.legs, m.prefillSeconds, prefillCollector{s})
	return m
}

// leg counts one leg's outcome, and a prefill leg's time.
func (m *pdMetrics) leg(leg, backend string, err error, took time.Duration) {
	outcome := "ok"
	switch {
	case isCanceled(err):
		outcome = "canceled"
	case err != nil:
		outcome = "error"
	}
	m.legs.WithLabelValues(leg, backend, outcome).Inc()
	if leg == "prefill" && err == nil {
		m.prefillSeconds.WithLabelValues(backend).Observe(took.Seconds())
	}
}

var prefillInFlightDesc = prometheus.NewDesc("prefixgate_disagg_prefill_in_flight",
	"Prefill legs in flight per prefill backend, as the router counts them.", []string{"backend"}, nil)

// prefillCollector reads the prefill router's in-flight counts at scrape
// time.
type prefillCollector struct{ s *Server }

func (c prefillCollector) Describe(ch chan<- *prometheus.Desc) { ch <- prefillInFlightDesc }

func (c prefillCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.pd == nil {
		return
	}
	for _, st := range c.s.pd.prefill.Status() {
		ch <- prometheus.MustNewConstMetric(prefillInFlightDesc, prometheus.GaugeValue, float64(st.InFlight), st.Name)
	}
}
