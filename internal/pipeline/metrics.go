package pipeline

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixgate/prefixgate/route"
)

// metrics are the pipeline's Prometheus series; docs/metrics.md lists
// them. The front door that runs the pipeline registers them
// (Collectors) beside its own.
type metrics struct {
	normalizeSeconds prometheus.Histogram
	normalizeErrors  *prometheus.CounterVec
	decisionSeconds  prometheus.Histogram
	queueSeconds     prometheus.Histogram
	spills           prometheus.Counter
}

func newMetrics() metrics {
	fast := []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 0.025, 0.1}
	return metrics{
		normalizeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "prefixgate_normalize_seconds", Help: "Time to canonicalize a body and compute its key.", Buckets: fast,
		}),
		normalizeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_normalize_errors_total", Help: "Bodies rejected by the normalizer, by reason.",
		}, []string{"reason"}),
		decisionSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "prefixgate_routing_decision_seconds", Help: "Time to pick a backend, including any queue wait.", Buckets: fast,
		}),
		queueSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "prefixgate_queue_wait_seconds", Help: "Time requests waited for a backend below its bound.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		spills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prefixgate_spills_total", Help: "Requests sent past their home backend because it was at its bound.",
		}),
	}
}

// Collectors are the pipeline's series, for the front door's registry.
func (p *Pipeline) Collectors() []prometheus.Collector {
	m := &p.metrics
	return []prometheus.Collector{m.normalizeSeconds, m.normalizeErrors, m.decisionSeconds, m.queueSeconds, m.spills}
}

// ObservePick records how long a pick took, queue wait included, and the
// wait itself; d is nil when the pick failed.
func (p *Pipeline) ObservePick(took time.Duration, d *route.Decision) {
	p.metrics.decisionSeconds.Observe(took.Seconds())
	if d != nil && d.Queued > 0 {
		p.metrics.queueSeconds.Observe(d.Queued.Seconds())
	}
}

// CountSpill counts d when it sent the request past its home backend.
func (p *Pipeline) CountSpill(d *route.Decision) {
	if d.Reason == route.ReasonSpill || d.Reason == route.ReasonSpillChain {
		p.metrics.spills.Inc()
	}
}
