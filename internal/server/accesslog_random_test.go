package server

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRequestLineRandomValues: on values drawn from every byte (control
// bytes, quotes, '=', backslashes, spaces, invalid and valid UTF-8), the
// line NewLogHandler writes is the line slog's own handlers write, in text
// and in JSON.
func TestRequestLineRandomValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 5))
	// Mostly plain bytes so that many lines take the hand-written path,
	// with odd ones mixed in.
	odd := []string{"\x00", "\x1f", "\x7f", " ", "=", `"`, `\`, "\t", "\n", "\u00e9", "\u2028", "\xff", "\xe2\x82", "<", "&", "%", "'"}
	oddLine := false
	value := func() string {
		var b []byte
		for range rng.IntN(12) + 1 {
			if oddLine && rng.IntN(8) == 0 {
				b = append(b, odd[rng.IntN(len(odd))]...)
			} else {
				b = append(b, byte('!'+rng.IntN('~'-'!'+1)))
			}
		}
		return string(b)
	}
	ctx := context.Background()
	fastLines := 0
	for i := range 4000 {
		oddLine = i%3 == 0
		l := requestLine{
			at: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(time.FixedZone("Z", 60*(rng.IntN(1440)-720))),
			id: value(), method: value(), path: value(), route: value(), status: rng.IntN(1000), duration: time.Duration(rng.Int64N(1e12)),
			backend: value(), decision: value(), routeKey: value(),
		}
		json := i%2 == 1
		var fast, slow bytes.Buffer
		lh := NewLogHandler(&fast, slog.LevelInfo, json).(*logHandler)
		if lh.writeRequestLine(&l) {
			fastLines++
		} else {
			logRequest(ctx, lh, &l)
		}
		var ref slog.Handler = slog.NewTextHandler(&slow, nil)
		if json {
			ref = slog.NewJSONHandler(&slow, nil)
		}
		logRequest(ctx, ref, &l)
		if fast.String() != slow.String() {
			t.Fatalf("line %d, json %v:\n got %q\nwant %q", i, json, fast.String(), slow.String())
		}
	}
	if fastLines < 500 {
		t.Fatalf("only %d of 4000 lines took the hand-written path: the test checks too little of it", fastLines)
	}
}
