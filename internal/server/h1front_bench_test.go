package server_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// BenchmarkServerHop measures the server hop alone: a keep-alive client
// POSTs a 1 KiB body and a handler reads it and answers 213 bytes with
// their length, served by the front door or by net/http's server. The
// client and the server run in this process, so ns/op holds both; the
// difference between the rows is the server's. cpu-µs/op is the
// process's CPU time per request.
//
//	go test ./internal/server -run '^$' -bench ServerHop -benchtime 20000x -count 3
func BenchmarkServerHop(b *testing.B) {
	answer := []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("a", 100) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	answer = answer[:213]
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Header()["Content-Length"] = []string{strconv.Itoa(len(answer))}
		_, _ = w.Write(answer)
	})
	body := bytes.Repeat([]byte("x"), 1024)
	for _, front := range []bool{true, false} {
		name := "net-http"
		if front {
			name = "front-door"
		}
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			if front {
				defer server.ServeFrontDoor(handler, ln)()
			} else {
				srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				defer srv.Close()
			}
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			url := "http://" + ln.Addr().String() + "/v1/chat/completions"
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b)()
			for range b.N {
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// BenchmarkServerHop16K is BenchmarkServerHop's front door with a 16 KiB
// body, which the handler reads into one buffer of its Content-Length as
// the proxy's handlers do: the body is larger than the front door's own
// read buffer (readBig).
//
//	go test ./internal/server -run '^$' -bench ServerHop16K -benchtime 20000x -count 5
func BenchmarkServerHop16K(b *testing.B) {
	answer := bytes.Repeat([]byte("a"), 213)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, r.ContentLength+1)
		if n, _ := io.ReadFull(r.Body, buf); int64(n) != r.ContentLength {
			http.Error(w, "short body", http.StatusBadRequest)
			return
		}
		w.Header()["Content-Length"] = []string{strconv.Itoa(len(answer))}
		_, _ = w.Write(answer)
	})
	body := bytes.Repeat([]byte("x"), 16<<10)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer server.ServeFrontDoor(handler, ln)()
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
