package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// stubModel is the only model the stub backends serve.
const stubModel = "m"

// stubReply is the fixed completion every stub answers with; %d is the
// replica index, so the load generator can count where requests went.
const stubReply = `{"id":"cmpl-stub%d","object":"chat.completion","created":1700000000,"model":"m",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":250,"completion_tokens":1,"total_tokens":251}}`

// replicaOf reads the replica index out of a stub reply (-1 if absent).
func replicaOf(body []byte) int {
	const marker = `"id":"cmpl-stub`
	if len(body) < len(marker)+2 || string(body[1:1+len(marker)]) != marker {
		return -1
	}
	d := body[1+len(marker)]
	if d < '0' || d > '9' {
		return -1
	}
	return int(d - '0')
}

// stubHandler answers like an OpenAI-compatible server with zero inference
// time: a fixed completion for every POST, /health, /v1/models and an
// empty /metrics.
func stubHandler(replica int) http.Handler {
	reply := []byte(fmt.Sprintf(stubReply, replica))
	replyLen := strconv.Itoa(len(reply))
	models := []byte(`{"object":"list","data":[{"id":"` + stubModel + `","object":"model","owned_by":"stub"}]}`)
	buf := make(chan []byte, 64)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(http.StatusOK)
			return
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			w.Write(models)
			return
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		var b []byte
		select {
		case b = <-buf:
		default:
			b = make([]byte, 32<<10)
		}
		for {
			if _, err := r.Body.Read(b); err != nil {
				break
			}
		}
		select {
		case buf <- b:
		default:
		}
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{replyLen}
		w.Write(reply)
	})
}

// runStubs serves n stub replicas on free loopback ports, prints one base
// URL per line on stdout, and serves until SIGTERM or SIGINT, or until
// stdin closes (the driver died).
func runStubs(n int) int {
	var servers []*http.Server
	out := bufio.NewWriter(os.Stdout)
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "stub:", err)
			return 1
		}
		srv := &http.Server{Handler: stubHandler(i), ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		go srv.Serve(ln)
		fmt.Fprintf(out, "http://%s\n", ln.Addr())
	}
	out.Flush()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	for _, s := range servers {
		s.Close()
	}
	return 0
}
