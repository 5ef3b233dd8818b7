package backends

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestUnreachableSaysClosedOnReuse: a request written to a reused
// keep-alive connection that the backend ends before a byte of answer (as
// llama-server does after every streamed answer) is unreachable with
// ClosedOnReuse set, so the server may send it once more; one whose own
// new connection ends unanswered is not, and either ejects the backend.
func TestUnreachableSaysClosedOnReuse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); closeAfterStream(c, n) })
		}
	})
	p, err := NewPool([]string{"http://" + ln.Addr().String()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	b := p.Backends()[0]
	resp, err := p.Forward(context.Background(), b, http.MethodPost, "/v1/completions", []byte("{}"), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for i, want := range []bool{true, false} {
		_, err := p.Forward(context.Background(), b, http.MethodPost, "/v1/completions", []byte("{}"), nil)
		var ue *UnreachableError
		if !errors.As(err, &ue) || ue.ClosedOnReuse != want || !ue.Sent {
			t.Fatalf("request %d: %#v, want unreachable, sent, ClosedOnReuse %v", i+2, err, want)
		}
		b.Observe(err, 0)
		if h := b.Health(); h.State != StateEjected {
			t.Fatalf("request %d: %+v, want ejected", i+2, h)
		}
	}
}

// closeAfterStream serves the first connection a chunked answer, then ends
// it once the next request is read; any later connection reads its
// request and ends without an answer.
func closeAfterStream(c net.Conn, n int) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	io.Copy(io.Discard, req.Body)
	if n > 0 {
		return
	}
	io.WriteString(c, "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
	http.ReadRequest(br)
	c.(*net.TCPConn).CloseWrite()
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
