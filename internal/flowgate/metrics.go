package flowgate

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
)

// OtherFlow is the flow label of fairness ids beyond the labelled ones.
const OtherFlow = "other"

type metrics struct {
	queued     *prometheus.GaugeVec
	wait       *prometheus.HistogramVec
	dispatched *prometheus.CounterVec
	shed       *prometheus.CounterVec
	served     *prometheus.CounterVec
	// labels maps a fairness id to its label: the configured tenants and
	// the first MetricFlows others seen keep their own; the rest "other".
	labels    map[string]string
	free      int
	series    map[seriesKey]*series // guarded by the gate's mutex
	byFlow    map[flowcontrol.Flow]*series
	maxSeries int
}

type seriesKey struct {
	band int
	flow string
}

// series are one band and flow label's metrics, looked up once.
type series struct {
	queued             prometheus.Gauge
	wait               prometheus.Observer
	dispatched         prometheus.Counter
	prompt, output     prometheus.Counter
	bandLabel, flowLbl string
}

func newMetrics(c compiled) *metrics {
	labels := []string{"band", "flow"}
	m := &metrics{
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "prefixgate_flow_queued_requests",
			Help: "Requests waiting in flow control, by band (priority) and flow (fairness id)."}, labels),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "prefixgate_flow_wait_seconds",
			Help:    "Time requests waited in flow control before dispatch, by band and flow (0 for those not queued).",
			Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, labels),
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prefixgate_flow_dispatched_total",
			Help: "Requests flow control let through to a backend, by band and flow."}, labels),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prefixgate_flow_shed_total",
			Help: "Requests flow control refused (429), by band, flow and reason."}, append(labels, "reason")),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prefixgate_flow_served_tokens_total",
			Help: "Tokens served, by band, flow and kind (prompt or output): what fairness is measured in."}, append(labels, "kind")),
		labels: map[string]string{},
		free:   c.cfg.MetricFlows,
		series: map[seriesKey]*series{},
		byFlow: map[flowcontrol.Flow]*series{},
	}
	for id := range c.cfg.TenantObjectives {
		m.labels[id] = id
	}
	for id := range c.cfg.TenantMaxObjectives {
		m.labels[id] = id
	}
	// Bands are bounded by flowcontrol.MaxBands, labels by the above.
	m.maxSeries = (len(m.labels) + m.free + 1) * (flowcontrol.MaxBands + 1)
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.queued, m.wait, m.dispatched, m.shed, m.served}
}

// label is the flow label of fairness id.
func (m *metrics) label(id string) string {
	if l, ok := m.labels[id]; ok {
		return l
	}
	if m.free > 0 && len(id) <= flowcontrol.MaxNameLen {
		m.free--
		m.labels[id] = id
		return id
	}
	return OtherFlow
}

// of returns the series of f, creating them once: one map lookup for a
// flow seen before.
func (m *metrics) of(f flowcontrol.Flow) *series {
	if s := m.byFlow[f]; s != nil {
		return s
	}
	s := m.labelled(f)
	if len(m.byFlow) < m.maxSeries {
		m.byFlow[f] = s
	}
	return s
}

// labelled returns the series of f's band and flow label.
func (m *metrics) labelled(f flowcontrol.Flow) *series {
	k := seriesKey{f.Priority, m.label(f.FairnessID)}
	if s := m.series[k]; s != nil {
		return s
	}
	if len(m.series) >= m.maxSeries {
		k.flow = OtherFlow
		if s := m.series[k]; s != nil {
			return s
		}
	}
	b := strconv.Itoa(f.Priority)
	s := &series{
		queued:     m.queued.WithLabelValues(b, k.flow),
		wait:       m.wait.WithLabelValues(b, k.flow),
		dispatched: m.dispatched.WithLabelValues(b, k.flow),
		prompt:     m.served.WithLabelValues(b, k.flow, "prompt"),
		output:     m.served.WithLabelValues(b, k.flow, "output"),
		bandLabel:  b,
		flowLbl:    k.flow,
	}
	m.series[k] = s
	return s
}

func (m *metrics) shedOne(s *series, reason flowcontrol.Reason) {
	m.shed.WithLabelValues(s.bandLabel, s.flowLbl, string(reason)).Inc()
}
