package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/internal/h1client"
)

// deadAddr returns an address nothing listens on: a listener's, closed.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestHealthRecordsProbeCause: a backend that never answers is ejected by
// its probes, and its Health says why and since when.
func TestHealthRecordsProbeCause(t *testing.T) {
	addr := deadAddr(t)
	p, err := NewPool([]string{addr}, Options{FailThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	p.now = clock.now
	b := p.Backends()[0]
	if h := b.Health(); h.LastError != "" || !h.LastErrorAt.IsZero() || !h.Since.IsZero() {
		t.Fatalf("before any probe: %+v, want no error and no change", h)
	}
	p.probeDue(context.Background())
	clock.advance(time.Second)
	p.probeDue(context.Background())
	h := b.Health()
	if h.State != StateEjected {
		t.Fatalf("after two failed probes: %v, want ejected", h.State)
	}
	if !strings.HasPrefix(h.LastError, "probe: GET /health: ") || !strings.Contains(h.LastError, "refused") {
		t.Errorf("LastError %q, want the probe's refused connection", h.LastError)
	}
	if strings.Contains(h.LastError, "http://") {
		t.Errorf("LastError %q repeats the backend's URL", h.LastError)
	}
	if want := clock.now(); !h.LastErrorAt.Equal(want) || !h.Since.Equal(want) {
		t.Errorf("LastErrorAt %v, Since %v, want both %v", h.LastErrorAt, h.Since, want)
	}
	clock.advance(12 * time.Second)
	if got, want := b.HealthName(), "ejected 12s ago: probe: GET /health: "; !strings.HasPrefix(got, want) {
		t.Errorf("HealthName = %q, want it to start %q", got, want)
	}
}

// TestHealthRecordsRequestCause: passive outcomes record their cause too.
func TestHealthRecordsRequestCause(t *testing.T) {
	p, err := NewPool([]string{deadAddr(t)}, Options{FailThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Backends()[0]
	b.Observe(nil, 503)
	if h := b.Health(); h.State != StateHealthy || h.LastError != "request: answered 503" {
		t.Fatalf("after one 503: %+v, want healthy with the 503 recorded", h)
	}
	b.Observe(&UnreachableError{Backend: b.Name, Err: errors.New("connection reset by peer")}, 0)
	if h := b.Health(); h.State != StateEjected || h.LastError != "request: connection reset by peer" {
		t.Fatalf("after an unreachable answer: %+v, want ejected with its cause", h)
	}
	b.Observe(&UnreachableError{Backend: b.Name, Err: &url.Error{Op: "Post", URL: "http://x/v1/chat/completions", Err: errors.New("connection refused")}}, 0)
	if h := b.Health(); h.LastError != "request: connection refused" {
		t.Fatalf("after a refused request: %q, want the cause without the URL", h.LastError)
	}
	b.Observe(&UnreachableError{Backend: b.Name, Err: fmt.Errorf("POST http://x/v1/chat/completions: %w", errors.New("connection refused"))}, 0)
	if h := b.Health(); h.LastError != "request: connection refused" {
		t.Fatalf("after a refused request: %q, want the cause without the URL", h.LastError)
	}
	b.Observe(&UnreachableError{Backend: b.Name, Err: errors.New("connection reset by peer")}, 0)
	b.Observe(context.Canceled, 0) // says nothing of the backend
	if h := b.Health(); h.LastError != "request: connection reset by peer" {
		t.Fatalf("a client that left replaced the cause: %q", h.LastError)
	}
}

// TestClosedOnReuseDoesNotEject: a reused keep-alive connection that the
// backend ended as the request went out (h1client.ErrClosedOnReuse) says
// nothing of the backend: it stays in, its streak and cause unchanged;
// the same error without the mark ejects it.
func TestClosedOnReuseDoesNotEject(t *testing.T) {
	p, err := NewPool([]string{deadAddr(t)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Backends()[0]
	eof := fmt.Errorf("reading the response: %w", io.ErrUnexpectedEOF)
	b.Observe(&UnreachableError{Backend: b.Name, Err: fmt.Errorf("POST http://x/v1/chat/completions: %w", errors.Join(eof, h1client.ErrClosedOnReuse)), Sent: true}, 0)
	if h := b.Health(); h.State != StateHealthy || h.LastError != "" {
		t.Fatalf("after a request on a connection closed on reuse: %+v, want healthy with no cause", h)
	}
	b.Observe(&UnreachableError{Backend: b.Name, Err: fmt.Errorf("POST http://x/v1/chat/completions: %w", eof), Sent: true}, 0)
	if h := b.Health(); h.State != StateEjected {
		t.Fatalf("after a request unanswered on its own connection: %+v, want ejected", h)
	}
}

func TestTruncateKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	if got := truncate(s, 5); got != "éé…" {
		t.Errorf("truncate = %q, want %q", got, "éé…")
	}
	if got := truncate("short", 5); got != "short" {
		t.Errorf("truncate = %q", got)
	}
}

func TestDescribe(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		h    Health
		want string
	}{
		{Health{State: StateHealthy, LastError: "old", LastErrorAt: t0}, "healthy"},
		{Health{State: StateDraining, Since: t0}, "draining"},
		{Health{State: StateEjected, Since: t0, LastError: "probe: x", LastErrorAt: t0}, "ejected 12s ago: probe: x"},
		{Health{State: StateEjected, Since: t0, LastError: "probe: y", LastErrorAt: t0.Add(10 * time.Second)}, "ejected 12s ago: probe: y (2s ago)"},
	} {
		if got := tc.h.Describe(t0.Add(12 * time.Second)); got != tc.want {
			t.Errorf("Describe(%+v) = %q, want %q", tc.h, got, tc.want)
		}
	}
}

// TestForwardFailureCause: a request Forward could not deliver leaves its
// cause, without the method and URL Forward's error adds.
func TestForwardFailureCause(t *testing.T) {
	p, err := NewPool([]string{deadAddr(t)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Backends()[0]
	_, err = p.Forward(context.Background(), b, "POST", "/v1/chat/completions", []byte(`{}`), nil)
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("Forward to a closed port: %v, want an UnreachableError", err)
	}
	b.Observe(err, 0)
	h := b.Health()
	if h.State != StateEjected || !strings.HasPrefix(h.LastError, "request: dial tcp ") || strings.Contains(h.LastError, "http://") {
		t.Errorf("after an undelivered request: %+v, want ejected with the dial error alone", h)
	}
}
