package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prefixgate/prefixgate/internal/server"
)

// TestRecycledBodiesStayIntact: canonical bodies are recycled, and a
// backend that answers before it reads the request (so the proxy finishes
// the exchange while its transport is still writing the body) still
// receives every body whole. Each body repeats its own marker; a buffer
// handed to the next request too early would show another's.
func TestRecycledBodiesStayIntact(t *testing.T) {
	// Bodies of 550 kB, under the pool's 1 MiB cap and over what loopback
	// socket buffers take at once, so that writes outlast the answers.
	const repeats = 50000
	var bad, seen atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"message":{"content":"early"}}]}`))
		rc.Flush()
		body, err := io.ReadAll(r.Body)
		seen.Add(1)
		marker := "doc-" + id + " "
		if err != nil || strings.Count(string(body), marker) != repeats || strings.Count(string(body), "doc-") != repeats {
			if bad.Add(1) == 1 {
				t.Logf("first bad body: err %v, %d bytes, %.120q", err, len(body), body)
			}
		}
	}))
	defer backend.Close()
	srv, err := server.New(server.Config{Backends: []string{backend.URL}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	router := httptest.NewServer(srv.Handler())
	defer router.Close()
	const requests, workers = 60, 8
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > requests {
					return
				}
				id := fmt.Sprintf("%06d", i)
				body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("doc-"+id+" ", repeats) + `"}]}`
				req, _ := http.NewRequest(http.MethodPost, router.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Request-Id", id)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("request %s: status %d", id, resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	backend.Close() // waits for the handlers still reading
	if seen.Load() != requests || bad.Load() != 0 {
		t.Fatalf("backend read %d bodies, %d of them not whole; want %d, 0", seen.Load(), bad.Load(), requests)
	}
}
