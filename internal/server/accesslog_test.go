package server

import (
	"bytes"
	"context"
	"log/slog"
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
		{id: "0123456789abcdef", method: "POST", path: "/v1/chat/completions", status: 200, duration: 312500 * time.Nanosecond,
			backend: "127.0.0.1:9001", decision: "affinity", routeKey: "00112233aabbccdd"},
		{id: "a<b>&c", method: "GET", path: "/v1/models", status: 404, duration: 2 * time.Second,
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
