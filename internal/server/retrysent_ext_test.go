package server_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// dyingBackend answers every GET (health probes) with 200 and reads each
// POST whole, then closes the connection without an answer, as a replica
// that dies while running the request. posts counts the POSTs it read.
func dyingBackend(t *testing.T, posts *atomic.Int32) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if req.Method == http.MethodPost {
					posts.Add(1)
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{}")
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestRetrySent: a request that reached a backend which then closed
// without an answer is retried on the other with the default (so both
// ran it), and with routing.retry_sent false answered 502 at once, having
// reached one backend only.
func TestRetrySent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retrySent *bool
		reads     int32
	}{
		{"default", nil, 2},
		{"true", new(true), 2},
		{"false", new(false), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var posts atomic.Int32
			cfg := server.Config{
				Backends:  []string{dyingBackend(t, &posts), dyingBackend(t, &posts)},
				RetrySent: tc.retrySent,
			}
			srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			body := chatBodyFor("vllmsim/tiny", "a request that must run at most once")
			status, _, raw := call(t, http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions", "application/json", body, nil)
			if status != http.StatusBadGateway {
				t.Errorf("status %d, body %s; want 502", status, raw)
			}
			if got := posts.Load(); got != tc.reads {
				t.Errorf("the backends read the request %d times; want %d", got, tc.reads)
			}
		})
	}
}
