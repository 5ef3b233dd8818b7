package backends

import (
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
