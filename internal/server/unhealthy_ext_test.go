package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/internal/server"
)

// syncBuffer is a log sink the test reads while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUnhealthyBackendSaysWhy: a backend URL that never answers is ejected
// when a request finds it unreachable, and the cause (the refused
// connection) and when reach the log, ListBackends, /v1/explain and the
// 503 the next client gets.
func TestUnhealthyBackendSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	var logs syncBuffer
	srv, err := server.New(server.Config{Backends: []string{dead}}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := serveFor(t, srv)
	body := chatBodyFor("gpt-4o", "hello")
	// The first request finds nothing there: 502 (or 503 if the start-up
	// probes were quicker), and the backend is out.
	if status, _, raw := call(t, http.MethodPost, base+"/v1/chat/completions", "application/json", body, nil); status != http.StatusBadGateway && status != http.StatusServiceUnavailable {
		t.Fatalf("first request: status %d, body %s; want 502 or 503", status, raw)
	}

	admin := prefixgatev1connect.NewAdminServiceClient(http.DefaultClient, base)
	var b *pb.Backend
	for b == nil || b.GetHealth() != pb.Health_HEALTH_EJECTED {
		res, err := admin.ListBackends(context.Background(), connect.NewRequest(&pb.ListBackendsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		b = res.Msg.GetBackends()[0]
		time.Sleep(5 * time.Millisecond) // until the outcome has been judged
	}
	if !strings.Contains(b.GetLastError(), "refused") || strings.Contains(b.GetLastError(), "http://") {
		t.Errorf("ListBackends last_error %q, want the refused connection without the URL", b.GetLastError())
	}
	for _, ts := range []string{b.GetLastErrorTime(), b.GetHealthSince()} {
		if at, err := time.Parse(time.RFC3339Nano, ts); err != nil || time.Since(at) < 0 {
			t.Errorf("ListBackends time %q: %v, want a past RFC 3339 time", ts, err)
		}
	}

	status, _, raw := call(t, http.MethodPost, base+"/v1/chat/completions", "application/json", body, nil)
	e := decodeError(t, raw)
	want := `no healthy backend serves model "gpt-4o": ` + dead + ` ejected `
	if status != http.StatusServiceUnavailable || e.Error.Code != "no_backend" ||
		!strings.HasPrefix(e.Error.Message, want) || !strings.Contains(e.Error.Message, "refused") {
		t.Errorf("status %d, message %q; want 503 no_backend starting %q and naming the refused connection", status, e.Error.Message, want)
	}

	t.Logf("503: %s", e.Error.Message)
	status, _, raw = call(t, http.MethodPost, base+"/v1/explain", "application/json", body, nil)
	var ex struct {
		Reason  string
		Skipped []string
	}
	if err := json.Unmarshal(raw, &ex); err != nil || status != http.StatusOK {
		t.Fatalf("explain: status %d, body %s (%v)", status, raw, err)
	}
	if !strings.Contains(ex.Reason, "503") || !strings.Contains(ex.Reason, "refused") {
		t.Errorf("explain reason %q, want the 503 and its cause", ex.Reason)
	}
	if len(ex.Skipped) != 1 || !strings.Contains(ex.Skipped[0], ": ejected ") || !strings.Contains(ex.Skipped[0], "refused") {
		t.Errorf("explain skipped %q, want the backend ejected with its cause", ex.Skipped)
	}

	log := logs.String()
	i := strings.Index(log, "level=WARN msg=\"backend ejected\"")
	if i < 0 {
		t.Fatalf("no warning of the ejection in the log:\n%s", log)
	}
	if line, _, _ := strings.Cut(log[i:], "\n"); !strings.Contains(line, "refused") || !strings.Contains(line, dead) {
		t.Errorf("ejection warning %q does not name the backend and the cause", line)
	}
}

// serveFor serves srv on a loopback listener until the test ends and
// returns its base URL.
func serveFor(t *testing.T, srv *server.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
