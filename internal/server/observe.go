package server

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/prefixgate/prefixgate/internal/h1front"
)

// RequestIDHeader carries the request id: the caller's, when it sends a
// valid one, else one the router makes. It is logged, returned and
// forwarded to the backend.
const RequestIDHeader = "X-Request-Id"

// tracing holds the tracer; without an OTLP endpoint it is a no-op.
type tracing struct {
	tracer   trace.Tracer
	shutdown func(context.Context) error
	// on is set when spans are exported. Without it requests build no
	// spans at all (their attributes, contexts and strings cost CPU on
	// every request); the caller's traceparent still reaches the backend
	// through forwardHeaders.
	on bool
}

var propagator = propagation.TraceContext{}

// newTracing exports spans over OTLP/HTTP to endpoint (for example
// http://collector:4318), or does nothing when endpoint is empty.
func newTracing(endpoint string) (tracing, error) {
	if endpoint == "" {
		return tracing{tracer: noop.NewTracerProvider().Tracer("prefixgate"), shutdown: func(context.Context) error { return nil }}, nil
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
	if err != nil {
		return tracing{}, fmt.Errorf("trace_endpoint: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("prefixgate"))),
	)
	return tracing{tracer: tp.Tracer("prefixgate"), shutdown: tp.Shutdown, on: true}, nil
}

// validRequestID accepts up to 128 printable ASCII characters.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// statusWriter remembers the status; Unwrap keeps Flush and the rest of
// http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush is needed directly: connect-go and gRPC streaming assert
// http.Flusher rather than use http.ResponseController.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// observed is a request's statusWriter and the two values of its id.
type observed struct {
	statusWriter
	ids [2]string
}

// observe gives every request an id, a span (continuing the caller's
// traceparent) and one structured log line when it ends.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h1front.MarkStart(r.Context(), start) // the request timeout counts from here
		// The header names here are canonical: looked up as they are,
		// without Get's canonicalization of each.
		id := headerValue(r.Header, RequestIDHeader)
		// The writer and the id's two values in one allocation; the values
		// are set without Set's check of the name.
		sw := &observed{statusWriter: statusWriter{ResponseWriter: w}}
		fresh := !validRequestID(id)
		if fresh {
			// A request id needs to be unique, not secret: the runtime's
			// per-thread generator instead of a getrandom call (1% of
			// the router's CPU).
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], rand.Uint64())
			id = hex.EncodeToString(b[:])
		}
		sw.ids = [2]string{id, id}
		if fresh {
			r.Header[RequestIDHeader] = sw.ids[0:1:1]
		}
		w.Header()[RequestIDHeader] = sw.ids[1:2:2]
		var span trace.Span
		if s.tracing.on {
			ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			ctx, span = s.tracing.tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path), attribute.String("prefixgate.request_id", id)))
			defer span.End()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(&sw.statusWriter, r)
		h := w.Header()
		backend, decision, key := headerValue(h, BackendHeader), headerValue(h, DecisionHeader), headerValue(h, KeyHeader)
		if span != nil {
			span.SetAttributes(attribute.Int("http.response.status_code", sw.status),
				attribute.String("prefixgate.backend", backend),
				attribute.String("prefixgate.decision", decision),
				attribute.String("prefixgate.key", key))
			if sw.status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(sw.status))
			}
		}
		now := time.Now()
		logRequest(r.Context(), s.log.Handler(), &requestLine{at: now, id: id, method: r.Method, path: r.URL.Path,
			status: sw.status, duration: now.Sub(start), backend: backend, decision: decision, routeKey: key})
	})
}

// startSpan starts a child span of the request's span.
func (s *Server) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return s.tracing.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// injectTrace writes the current span's traceparent into hdr, so the
// backend's own traces join the router's.
func injectTrace(ctx context.Context, hdr http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(hdr))
}

// headerValue is h.Get(key) for a key already in canonical form.
func headerValue(h http.Header, key string) string {
	if vs := h[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}
