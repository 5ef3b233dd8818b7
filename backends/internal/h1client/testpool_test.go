package h1client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// Options, Backend and testPool stand in for the backends package's pool
// in these tests: Forward sends as Pool.Forward does, on the fast path
// when FastPath takes the request and through the fallback otherwise.
type Options struct{ FirstByteTimeout time.Duration }

type Backend struct{ URL *url.URL }

type testPool struct{ transport *Transport }

// UnreachableError stands in for the pool's error of a request that got
// no answer.
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return "unreachable: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

func newTestPool(t *testing.T, rawURL string, o Options) (*testPool, *Backend) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	fallback := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: o.FirstByteTimeout}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &Transport{Fallback: fallback, Dial: dialer.DialContext, HeaderTimeout: o.FirstByteTimeout,
		MaxIdlePerHost: 64, IdleTimeout: 90 * time.Second, ReadBufferSize: 32 << 10}
	// Idle connections end with the test, so that servers' connection
	// goroutines do.
	t.Cleanup(tr.CloseIdleConnections)
	return &testPool{transport: tr}, &Backend{URL: u}
}

func (p *testPool) Forward(ctx context.Context, b *Backend, method, path string, body []byte, hdr http.Header) (*http.Response, error) {
	u := *b.URL
	u.Path = path
	req := (&http.Request{
		Method: method, URL: &u, Host: u.Host, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: hdr, ContentLength: int64(len(body)), Body: http.NoBody,
	}).WithContext(ctx)
	var resp *http.Response
	var err error
	if FastPath(&u, int64(len(body))) {
		if req.Header == nil {
			req.Header = http.Header{}
		}
		resp, err = p.transport.Forward(req, body)
	} else {
		req.Header = hdr.Clone()
		if req.Header == nil {
			req.Header = http.Header{}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Body = &bodyReader{b: body}
		resp, err = p.transport.RoundTrip(req)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, &UnreachableError{Err: err}
	}
	return resp, nil
}

type bodyReader struct{ b []byte }

func (r *bodyReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func (r *bodyReader) Close() error { return nil }
