package backends

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// cannedTransport answers every request at once with an empty 200, so that
// BenchmarkForwardRequest measures what Forward itself costs: building the
// request and handing it over, no network.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

func BenchmarkForwardRequest(b *testing.B) {
	p, err := NewPool([]string{"http://127.0.0.1:9/"}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.transport = cannedTransport{}
	be := p.Backends()[0]
	body := []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("x", 1000) + `"}],"model":"m"}`)
	hdr := http.Header{"Accept": {"application/json"}, "User-Agent": {"bench"}, "X-Request-Id": {"r-1"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Forward(ctx, be, http.MethodPost, "/v1/chat/completions", body, hdr)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

// BenchmarkAppendRequest is the HTTP/1.1 fast path's serialization of a
// 16 KiB request into a reused buffer.
func BenchmarkAppendRequest(b *testing.B) {
	body := []byte(strings.Repeat("x", 16<<10))
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:9/v1/chat/completions", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header = http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r-1"}}
	req.ContentLength = int64(len(body))
	rd := new(bytes.Reader)
	req.Body = io.NopCloser(rd)
	buf := make([]byte, 0, 32<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		if buf, err = appendRequest(buf[:0], req); err != nil {
			b.Fatal(err)
		}
	}
}
