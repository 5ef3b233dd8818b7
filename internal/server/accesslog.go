package server

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prefixgate/prefixgate/internal/routes"
)

// NewLogHandler is slog's text handler (or, with json, its JSON handler)
// writing to w at level, which also writes observe's per-request line
// itself: the same line, byte for byte, without a slog.Record (which
// keeps eight attributes in a slice it allocates) or the handler's
// generic walk over them. That walk was 3–8% of the router's CPU
// (docs/benchmarks.md, "Overhead against HAProxy"). A line whose values
// are not all plain (see plainLogValue) goes through slog, so that its
// quoting and escaping stay slog's. Loggers derived with With or
// WithGroup are slog's own handlers.
func NewLogHandler(w io.Writer, level slog.Leveler, json bool) slog.Handler {
	lw := &lockedWriter{w: w}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(lw, opts)
	if json {
		h = slog.NewJSONHandler(lw, opts)
	}
	return &logHandler{Handler: h, w: lw, json: json}
}

// lockedWriter serializes the fast line's writes with slog's own: both
// write whole lines through it, so lines never interleave whatever w is.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type logHandler struct {
	slog.Handler
	w    *lockedWriter
	json bool
	// second caches the formatted time of the second the last line fell
	// in: formatting a whole time for every line was 2% of the router's
	// CPU, and under load most lines share their second.
	second atomic.Pointer[logSecond]
}

// logSecond is one second's formatted date, time of day and zone.
type logSecond struct {
	unix int64
	loc  *time.Location
	// date is "2006-01-02T15:04:05", zone "Z07:00", as AppendFormat
	// writes them for this second in loc.
	date, zone []byte
}

// appendTime appends t as t.AppendFormat(b, time.RFC3339Nano) (json) or
// t.AppendFormat(b, logTimeLayout) does, formatting the date, time of day
// and zone once a second (per location).
func (h *logHandler) appendTime(b []byte, t time.Time) []byte {
	sec, loc := t.Unix(), t.Location()
	cs := h.second.Load()
	if cs == nil || cs.unix != sec || cs.loc != loc {
		cs = &logSecond{unix: sec, loc: loc,
			date: t.AppendFormat(nil, "2006-01-02T15:04:05"), zone: t.AppendFormat(nil, "Z07:00")}
		h.second.Store(cs)
	}
	b = append(b, cs.date...)
	ns := t.Nanosecond()
	if h.json {
		// RFC3339Nano: up to nine digits, trailing zeros dropped, none
		// (and no dot) for a whole second.
		if ns != 0 {
			var digits [10]byte
			digits[0] = '.'
			for i := 9; i >= 1; i-- {
				digits[i] = byte('0' + ns%10)
				ns /= 10
			}
			n := 10
			for digits[n-1] == '0' {
				n--
			}
			b = append(b, digits[:n]...)
		}
	} else {
		ms := ns / 1e6 // truncated, as the layout's ".000" does
		b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	}
	return append(b, cs.zone...)
}

// requestLine is one answered request's log record.
type requestLine struct {
	at               time.Time
	id, method, path string
	// route is the path's label in the route table, "" for a path it
	// does not hold (health, metrics, the RPCs, an unknown path);
	// logRequest finds it when it is not set.
	route                       string
	status                      int
	duration                    time.Duration
	backend, decision, routeKey string
}

var logBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeRequestLine writes l as slog's handler would write the record
// logRequest builds; false, with nothing written, when a value is not
// plain.
func (h *logHandler) writeRequestLine(l *requestLine) bool {
	for _, v := range [...]string{l.id, l.method, l.path, l.route, l.backend, l.decision, l.routeKey} {
		if !plainLogValue(v) {
			return false
		}
	}
	bp := logBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	if h.json {
		b = append(b, `{"time":"`...)
		b = h.appendTime(b, l.at)
		b = append(b, `","level":"INFO","msg":"request","request_id":"`...)
		b = append(b, l.id...)
		b = append(b, `","method":"`...)
		b = append(b, l.method...)
		b = append(b, `","path":"`...)
		b = append(b, l.path...)
		b = append(b, `","route":"`...)
		b = append(b, l.route...)
		b = append(b, `","status":`...)
		b = strconv.AppendInt(b, int64(l.status), 10)
		b = append(b, `,"duration":`...)
		b = strconv.AppendInt(b, int64(l.duration), 10)
		b = append(b, `,"backend":"`...)
		b = append(b, l.backend...)
		b = append(b, `","decision":"`...)
		b = append(b, l.decision...)
		b = append(b, `","key":"`...)
		b = append(b, l.routeKey...)
		b = append(b, "\"}\n"...)
	} else {
		b = append(b, "time="...)
		b = h.appendTime(b, l.at)
		b = append(b, " level=INFO msg=request request_id="...)
		b = append(b, l.id...)
		b = append(b, " method="...)
		b = append(b, l.method...)
		b = append(b, " path="...)
		b = append(b, l.path...)
		b = append(b, " route="...)
		b = append(b, l.route...)
		b = append(b, " status="...)
		b = strconv.AppendInt(b, int64(l.status), 10)
		b = append(b, " duration="...)
		b = append(b, l.duration.String()...)
		b = append(b, " backend="...)
		b = append(b, l.backend...)
		b = append(b, " decision="...)
		b = append(b, l.decision...)
		b = append(b, " key="...)
		b = append(b, l.routeKey...)
		b = append(b, '\n')
	}
	_, _ = h.w.Write(b)
	if cap(b) <= 4<<10 {
		*bp = b[:0]
		logBuffers.Put(bp)
	}
	return true
}

// plainLogValue: a non-empty string of printable ASCII without a space,
// '"', '\' or '=': slog's text handler writes it unquoted and its JSON
// handler unescaped.
func plainLogValue(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '=' {
			return false
		}
	}
	return true
}

// logTimeLayout is the text handler's time: RFC 3339 with exactly three
// digits of fractional seconds (Go's formatting truncates them).
const logTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// logRequest writes observe's line for one request at info level, when
// the handler takes that level.
func logRequest(ctx context.Context, lh slog.Handler, l *requestLine) {
	if !lh.Enabled(ctx, slog.LevelInfo) {
		return
	}
	if l.route == "" {
		if rt := routes.Lookup(l.path); rt != nil {
			l.route = rt.Label
		}
	}
	if fh, ok := lh.(*logHandler); ok && fh.writeRequestLine(l) {
		return
	}
	// The record goes to the handler directly, without the caller's pc
	// that LogAttrs takes with runtime.Callers (a fifth of the line's
	// CPU): a handler prints it only with AddSource, which serve does
	// not set.
	rec := slog.NewRecord(l.at, slog.LevelInfo, "request", 0)
	rec.AddAttrs(slog.String("request_id", l.id), slog.String("method", l.method), slog.String("path", l.path),
		slog.String("route", l.route), slog.Int("status", l.status), slog.Duration("duration", l.duration),
		slog.String("backend", l.backend), slog.String("decision", l.decision),
		slog.String("key", l.routeKey))
	_ = lh.Handle(ctx, rec)
}
