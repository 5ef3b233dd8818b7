package server

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the router's own Prometheus series; docs/metrics.md lists them.
type metrics struct {
	registry         *prometheus.Registry
	requests         *prometheus.CounterVec
	firstByteSeconds *prometheus.HistogramVec
	retries          *prometheus.CounterVec
	// promptTokens and cachedPromptTokens count the answers' reported
	// usage (usage.go).
	promptTokens       *prometheus.CounterVec
	cachedPromptTokens *prometheus.CounterVec
	// backendCacheTokens is each backend's stated cache capacity, labelled
	// with its engine (usage.go).
	backendCacheTokens *prometheus.GaugeVec
	// frontRequests and handovers count the HTTP/1.1 front door's work
	// (internal/h1front).
	frontRequests prometheus.Counter
	handovers     prometheus.Counter

	// requestSeries and firstByteSeries cache the children of requests
	// and firstByteSeconds read on every request.
	requestSeries   seriesCache[requestLabels, prometheus.Counter]
	firstByteSeries seriesCache[string, prometheus.Observer]
}

// request is requests' series for l.
func (m *metrics) request(l requestLabels) prometheus.Counter {
	return m.requestSeries.get(l, func() prometheus.Counter {
		return m.requests.WithLabelValues(l.route, l.decision, l.backend, strconv.Itoa(l.code))
	})
}

// firstByte is firstByteSeconds' series for backend.
func (m *metrics) firstByte(backend string) prometheus.Observer {
	return m.firstByteSeries.get(backend, func() prometheus.Observer {
		return m.firstByteSeconds.WithLabelValues(backend)
	})
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_requests_total",
			Help: "Requests answered, by route, routing decision, backend and status code.",
		}, []string{"route", "decision", "backend", "code"}),
		firstByteSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "prefixgate_backend_first_byte_seconds", Help: "Time from forwarding to the backend's response headers.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"backend"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_retries_total", Help: "Requests retried on another backend because this one sent nothing back.",
		}, []string{"backend"}),
		promptTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_prompt_tokens_total",
			Help: "Prompt tokens of answers that reported both prompt and cached tokens, by backend.",
		}, []string{"backend"}),
		cachedPromptTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prefixgate_cached_prompt_tokens_total",
			Help: "Of prefixgate_prompt_tokens_total, the tokens the backend's prefix cache held, by backend.",
		}, []string{"backend"}),
		backendCacheTokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "prefixgate_backend_cache_tokens",
			Help: "The backend's KV-cache capacity in tokens as its engine states it (0: unknown), by backend and detected or configured engine.",
		}, []string{"backend", "engine"}),
		frontRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prefixgate_http1_front_requests_total",
			Help: "HTTP/1.1 requests served by the front door's own loop (plain shape) rather than net/http.",
		}),
		handovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prefixgate_http1_handovers_total",
			Help: "Connections handed to net/http's server: TLS, h2c, or a request that is not of the plain shape.",
		}),
	}
	m.registry.MustRegister(m.requests, m.firstByteSeconds, m.retries,
		m.promptTokens, m.cachedPromptTokens, m.backendCacheTokens, m.frontRequests, m.handovers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// registerRouter adds the series read from the router at scrape time:
// in-flight counts and health per backend, and the prefix index's (0 for
// policies without one).
func (m *metrics) registerRouter(s *Server) {
	m.registry.MustRegister(fleetCollector{s},
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "prefixgate_route_index_mispredictions_total",
			Help: "Responses whose reported cached prompt tokens fell short of what the prefix index predicted.",
		}, func() float64 {
			st, _ := s.rt().IndexStats()
			return float64(st.Mispredictions)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "prefixgate_route_index_bytes",
			Help: "Memory held by the prefix index, estimated from its tables.",
		}, func() float64 {
			st, _ := s.rt().IndexStats()
			return float64(st.Bytes)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "prefixgate_responses_stored_ids",
			Help: "Responses ids remembered with the backend that stored them (bounded by responses.max_ids).",
		}, func() float64 { return float64(s.responses.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "prefixgate_sessions",
			Help: "Sessions remembered with their backend (bounded by routing.max_sessions).",
		}, func() float64 { return float64(s.sessions.Len()) }),
	)
}

var (
	inFlightDesc = prometheus.NewDesc("prefixgate_backend_in_flight",
		"Requests in flight per backend, as the router counts them.", []string{"backend"}, nil)
	healthyDesc = prometheus.NewDesc("prefixgate_backend_healthy",
		"1 when the backend is in the candidate set.", []string{"backend"}, nil)
)

// fleetCollector reads each member's in-flight count and health from the
// router at scrape time: a series per current backend, never staler than
// the scrape.
type fleetCollector struct{ s *Server }

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- inFlightDesc; ch <- healthyDesc }

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.router == nil {
		return
	}
	members := c.s.rt().Status()
	if c.s.pd != nil {
		members = append(members, c.s.pd.prefillOnly()...) // a disaggregated fleet's prefill workers
	}
	for _, st := range members {
		healthy := 0.0
		if st.Healthy {
			healthy = 1
		}
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(st.InFlight), st.Name)
		ch <- prometheus.MustNewConstMetric(healthyDesc, prometheus.GaugeValue, healthy, st.Name)
	}
}

// seriesCache holds a vector's children by their label values, so that the
// request path finds its series with one map lookup under a read lock
// instead of WithLabelValues (label strings formatted, hashed and checked,
// the vector locked) on every request. It holds the same series the vector
// does, so its size is bounded as the vector's is; series read through it
// are never deleted from the vector.
type seriesCache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *seriesCache[K, V]) get(k K, newSeries func() V) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = newSeries()
	c.mu.Lock()
	if c.m == nil {
		c.m = map[K]V{}
	}
	c.m[k] = v
	c.mu.Unlock()
	return v
}

// requestLabels are prefixgate_requests_total's labels.
type requestLabels struct {
	route, decision, backend string
	code                     int
}
