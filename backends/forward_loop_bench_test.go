package backends_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prefixgate/prefixgate/backends"
)

// BenchmarkForwardLoopback is Forward over loopback to a keep-alive
// net/http backend that answers 213 bytes: the HTTP/1.1 client's whole
// exchange (the look at a reused connection, the write, the wait, the
// header's parse, the body), the backend's work included.
//
//	go test ./backends -run '^$' -bench ForwardLoopback -count 5
func BenchmarkForwardLoopback(b *testing.B) {
	answer := bytes.Repeat([]byte("a"), 213)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Header()["Content-Length"] = []string{strconv.Itoa(len(answer))}
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	p, err := backends.NewPool([]string{srv.URL}, backends.Options{})
	if err != nil {
		b.Fatal(err)
	}
	be := p.Backends()[0]
	body := bytes.Repeat([]byte("x"), 1024)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Forward(ctx, be, http.MethodPost, "/v1/chat/completions", body, nil)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
