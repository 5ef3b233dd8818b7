package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/server"
)

// benchChat is a 1 KiB chat completion request.
var benchChat = func() []byte {
	prefix := `{"model":"m","max_tokens":8,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"`
	suffix := `"}]}`
	pad := 1024 - len(prefix) - len(suffix)
	return []byte(prefix + strings.Repeat("x", pad) + suffix)
}()

const benchReply = `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":250,"completion_tokens":1,"total_tokens":251}}`

// benchBackend answers every chat request with a fixed completion, like a
// backend with zero inference time, so only forwarding is measured.
func benchBackend(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, benchReply)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func drain(b *testing.B, resp *http.Response) {
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n == 0 {
		b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
	}
}

// BenchmarkForward (kept here, not in backends, so that backends' tests
// need nothing under internal/) compares, on loopback, a client calling the backend
// directly, the same call through Pool.Forward, and the full router
// (server.New's handler: normalize, route, forward, copy back) served by
// httptest. Each op is one 1 KiB chat completion.
func BenchmarkForward(b *testing.B) {
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		srv := benchBackend(b)
		postChats(b, srv.URL+"/v1/chat/completions")
	})
	for _, h2c := range []bool{false, true} {
		b.Run(fmt.Sprintf("pool/h2c=%v", h2c), func(b *testing.B) {
			srv := httptest.NewUnstartedServer(benchBackend(b).Config.Handler)
			srv.Config.Protocols = new(http.Protocols)
			srv.Config.Protocols.SetHTTP1(true)
			srv.Config.Protocols.SetUnencryptedHTTP2(true)
			srv.Start()
			b.Cleanup(srv.Close)
			p, err := backends.NewPool([]string{srv.URL}, backends.Options{H2C: h2c})
			if err != nil {
				b.Fatal(err)
			}
			be := p.Backends()[0]
			b.ReportAllocs()
			b.SetBytes(int64(len(benchChat)))
			defer reportCPU(b)()
			for b.Loop() {
				resp, err := p.Forward(ctx, be, http.MethodPost, "/v1/chat/completions", benchChat, nil)
				if err != nil {
					b.Fatal(err)
				}
				drain(b, resp)
			}
		})
	}
	b.Run("server", func(b *testing.B) {
		be := benchBackend(b)
		s, err := server.New(server.Config{Backends: []string{be.URL}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		front := httptest.NewServer(s.Handler())
		b.Cleanup(front.Close)
		postChats(b, front.URL+"/v1/chat/completions")
	})
	// The full router served as serve serves it: the HTTP/1.1 front door,
	// the request log line written by serve's text handler.
	b.Run("server-front-door", func(b *testing.B) {
		be := benchBackend(b)
		s, err := server.New(server.Config{Backends: []string{be.URL}}, slog.New(server.NewLogHandler(io.Discard, slog.LevelInfo, false)))
		if err != nil {
			b.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- s.Serve(sctx, ln, time.Second) }()
		defer func() {
			stop()
			if err := <-served; err != nil {
				b.Error(err)
			}
		}()
		postChats(b, "http://"+ln.Addr().String()+"/v1/chat/completions")
	})
}

// postChats posts benchChat to url once per benchmark iteration over one
// keep-alive client, as an OpenAI client would.
func postChats(b *testing.B, url string) {
	ctx := context.Background()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChat)))
	defer reportCPU(b)()
	for b.Loop() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(benchChat))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		drain(b, resp)
	}
}

// BenchmarkRequestLogLine compares the two ways to write observe's request
// line to a text handler: Logger.LogAttrs, which takes the caller's pc
// (runtime.Callers) for every record, and a record handed to the handler
// without one, which observe does. The output is the same without
// AddSource.
func BenchmarkRequestLogLine(b *testing.B) {
	h := slog.NewTextHandler(io.Discard, nil)
	attrs := func() []slog.Attr {
		return []slog.Attr{slog.String("request_id", "0123456789abcdef"), slog.String("method", "POST"),
			slog.String("path", "/v1/chat/completions"), slog.Int("status", 200), slog.Duration("duration", 312*time.Microsecond),
			slog.String("backend", "127.0.0.1:9001"), slog.String("decision", "affinity"), slog.String("key", "00112233aabbccdd")}
	}
	ctx := context.Background()
	b.Run("LogAttrs", func(b *testing.B) {
		log := slog.New(h)
		b.ReportAllocs()
		for b.Loop() {
			log.LogAttrs(ctx, slog.LevelInfo, "request", attrs()...)
		}
	})
	b.Run("Handle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
			rec.AddAttrs(attrs()...)
			_ = h.Handle(ctx, rec)
		}
	})
}
