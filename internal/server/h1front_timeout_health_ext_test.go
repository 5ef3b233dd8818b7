package server_test

import (
	"fmt"
	"github.com/prefixgate/prefixgate/backends"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// TestFrontRequestTimeoutIsNotASuccess: a stream cut by the request
// timeout says nothing good of its backend with the front door on or off:
// it does not end the backend's failure streak, so 500, 500, a timed-out
// stream, 500 eject the backend (three failures in a row) either way. The
// front door's request context carries the timeout itself; the handler
// must still tell that from the client leaving.
func TestFrontRequestTimeoutIsNotASuccess(t *testing.T) {
	for _, stdlib := range []bool{true, false} {
		var calls atomic.Int32
		var probes atomic.Int32
		stop := make(chan struct{})
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/models" { // a probe's second step
				fmt.Fprintf(w, `{"data":[{"id":"m"},{"id":"probe%d"}]}`, probes.Add(1))
				return
			}
			if r.URL.Path != "/v1/chat/completions" {
				return
			}
			_, _ = io.ReadAll(r.Body)
			if calls.Add(1) != 3 {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"w\"}}]}\n\n")
			w.(http.Flusher).Flush()
			select { // stalls past the router's request timeout
			case <-r.Context().Done():
			case <-stop:
			}
		}))
		addr := frontRouterWith(t, server.Config{Backends: []string{hs.URL}, StdlibHTTP1: stdlib,
			RequestTimeout: 300 * time.Millisecond, Pool: backends.Options{ProbeInterval: time.Hour}})
		// A probe's success ends a failure streak too: the requests come
		// after Serve's two probes at its start (the next is an hour
		// away), which the router's model list shows.
		for !strings.Contains(get(t, "http://"+addr+"/v1/models"), "probe2") {
			time.Sleep(10 * time.Millisecond)
		}
		stream := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`
		for range 4 {
			exchange(t, addr, post("/v1/chat/completions", "Connection: close\r\n", stream))
		}
		ejected := false
		for range 100 { // the last outcome is recorded as its handler returns
			b := get(t, "http://"+addr+"/metrics")
			if ejected = strings.Contains(b, `prefixgate_backend_healthy{backend="`+strings.TrimPrefix(hs.URL, "http://")+`"} 0`) ||
				strings.Contains(b, `prefixgate_backend_healthy{backend="`+hs.URL+`"} 0`); ejected {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(stop)
		hs.Close()
		if calls.Load() != 4 {
			t.Fatalf("stdlib=%v: the backend saw %d requests, want 4", stdlib, calls.Load())
		}
		if !ejected {
			t.Errorf("stdlib=%v: 500, 500, a timed-out stream, 500 did not eject the backend", stdlib)
		}
	}
}

// get returns the body of a GET of url.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
