package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRequestLineAsSlogWritesIt: the request line NewLogHandler writes
// itself is the line slog's text and JSON handlers write for the same
// record, for plain values, values it leaves to slog (quoting, escaping,
// empty ones) and times in and out of UTC on and off the millisecond;
// below info level nothing is written.
func TestRequestLineAsSlogWritesIt(t *testing.T) {
	zone := time.FixedZone("X", -(3*3600 + 30*60))
	at := []time.Time{
		time.Date(2026, 12, 1, 9, 4, 5, 0, time.UTC),
		time.Date(2026, 12, 1, 9, 4, 5, 123456789, time.UTC),
		time.Date(2026, 12, 1, 9, 4, 5, 120000000, zone),
		time.Date(1999, 1, 2, 23, 59, 59, 999999999, time.Local),
	}
	lines := []requestLine{
		{id: "0123456789abcdef", method: "POST", path: "/v1/chat/completions", route: "chat_completions", status: 200, duration: 312500 * time.Nanosecond,
			backend: "127.0.0.1:9001", decision: "affinity", routeKey: "00112233aabbccdd"},
		{id: "a<b>&c", method: "GET", path: "/v1/models", route: "models", status: 404, duration: 2 * time.Second,
			backend: "http://b:8000", decision: "spill-chain", routeKey: "ff"},
		{id: "x", method: "POST", path: "/v1/chat/completions", status: 400, duration: time.Microsecond},                                // no backend: left to slog
		{id: `q"uote`, method: "POST", path: "/a b=c\\d\u00e9\n", status: 503, duration: 0, backend: "b", decision: "d", routeKey: "k"}, // left to slog
	}
	ctx := context.Background()
	for _, json := range []bool{false, true} {
		for _, when := range at {
			for _, l := range lines {
				l.at = when
				var fast, slow bytes.Buffer
				logRequest(ctx, NewLogHandler(&fast, slog.LevelInfo, json), &l)
				var ref slog.Handler = slog.NewTextHandler(&slow, nil)
				if json {
					ref = slog.NewJSONHandler(&slow, nil)
				}
				logRequest(ctx, ref, &l) // not a logHandler: the slog record
				if fast.String() != slow.String() || fast.Len() == 0 {
					t.Errorf("json %v:\n got %q\nwant %q", json, fast.String(), slow.String())
				}
				var quiet bytes.Buffer
				logRequest(ctx, NewLogHandler(&quiet, slog.LevelWarn, json), &l)
				if quiet.Len() != 0 {
					t.Errorf("at warn level: %q written", quiet.String())
				}
			}
		}
	}
}

// TestLogHandlerIsSlogs: other records, and loggers made with With, go
// through slog's handler unchanged.
func TestLogHandlerIsSlogs(t *testing.T) {
	var fast, slow bytes.Buffer
	at := time.Date(2026, 12, 1, 9, 4, 5, 6, time.UTC)
	for _, h := range []slog.Handler{NewLogHandler(&fast, slog.LevelInfo, false), slog.NewTextHandler(&slow, nil)} {
		rec := slog.NewRecord(at, slog.LevelWarn, "stream ended early", 0)
		rec.AddAttrs(slog.String("backend", "b"), slog.Any("err", "x y"))
		_ = h.Handle(context.Background(), rec)
		_ = h.WithAttrs([]slog.Attr{slog.Int("n", 1)}).Handle(context.Background(), rec)
	}
	if fast.String() != slow.String() {
		t.Errorf("got %q\nwant %q", fast.String(), slow.String())
	}
}

// TestLogTimeOncePerSecond: one handler formatting a run of times, most
// in the second of the one before, across second boundaries, whole
// seconds, times before 1970 and changes of zone, writes each as
// AppendFormat does (the layouts slog's handlers write), in text and in
// JSON.
func TestLogTimeOncePerSecond(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("A", 5*3600+30*60), time.FixedZone("B", -(7*3600 + 17)),
		time.FixedZone("C", 0)}
	for _, json := range []bool{false, true} {
		layout := logTimeLayout
		if json {
			layout = time.RFC3339Nano
		}
		h := NewLogHandler(io.Discard, slog.LevelInfo, json).(*logHandler)
		at := time.Unix(-3e6, 0)
		loc := time.UTC
		for i := range 5000 {
			switch r := rng.IntN(100); {
			case r < 70:
				at = at.Add(time.Duration(rng.Int64N(int64(300 * time.Microsecond))))
			case r < 85:
				at = at.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
			case r < 92:
				at = at.Truncate(time.Second) // a whole second
			case r < 97:
				loc = zones[rng.IntN(len(zones))]
			default:
				at = time.Unix(rng.Int64N(4e9)-1e9, rng.Int64N(1e9))
			}
			tm := at.In(loc)
			if got, want := h.appendTime(nil, tm), tm.AppendFormat(nil, layout); string(got) != string(want) {
				t.Fatalf("time %d (json %v): %q, want %q", i, json, got, want)
			}
		}
	}
}

// BenchmarkLogTime compares formatting the request line's time whole
// (AppendFormat, what the line did before) with appendTime's formatting
// once a second, on the times of a run of lines 20 µs apart, in text and
// JSON.
//
//	go test ./internal/server -run '^$' -bench LogTime -count 5
func BenchmarkLogTime(b *testing.B) {
	for _, json := range []bool{false, true} {
		layout, name := logTimeLayout, "text"
		if json {
			layout, name = time.RFC3339Nano, "json"
		}
		h := NewLogHandler(io.Discard, slog.LevelInfo, json).(*logHandler)
		start := time.Now()
		buf := make([]byte, 0, 64)
		b.Run(name+"/AppendFormat", func(b *testing.B) {
			at := start
			for b.Loop() {
				at = at.Add(20 * time.Microsecond)
				buf = at.AppendFormat(buf[:0], layout)
			}
		})
		b.Run(name+"/appendTime", func(b *testing.B) {
			at := start
			for b.Loop() {
				at = at.Add(20 * time.Microsecond)
				buf = h.appendTime(buf[:0], at)
			}
		})
	}
}
