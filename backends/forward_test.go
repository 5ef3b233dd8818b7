package backends

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// echoServer answers every request with its method, path, X-Test header
// and body, and counts the connections it accepted.
func echoServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s %s|", r.Method, r.URL.RequestURI(), r.Header.Get("X-Test"))
			w.Write(body)
		}
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(h))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func newTestPool(t *testing.T, url string, o Options) (*Pool, *Backend) {
	t.Helper()
	p, err := NewPool([]string{url}, o)
	if err != nil {
		t.Fatal(err)
	}
	// Idle connections end with the test, so that servers' connection
	// goroutines do.
	t.Cleanup(p.transport.(interface{ CloseIdleConnections() }).CloseIdleConnections)
	return p, p.Backends()[0]
}

func forwardBody(t *testing.T, p *Pool, b *Backend, path string, body []byte, hdr http.Header) string {
	t.Helper()
	resp, err := p.Forward(context.Background(), b, http.MethodPost, path, body, hdr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

// HoldsBody is false exactly where the fast path takes the request, and
// there the caller may reuse the body as soon as Forward returns: the
// backend still gets the bytes it was given.
func TestHoldsBodyOnlyOffTheFastPath(t *testing.T) {
	srv, _ := echoServer(t, nil)
	p, b := newTestPool(t, srv.URL, Options{})
	if p.HoldsBody(b, 1000) || p.HoldsBody(b, maxFastBody) || p.HoldsBody(b, 0) {
		t.Error("the HTTP/1.1 fast path is said to hold the body")
	}
	if !p.HoldsBody(b, maxFastBody+1) {
		t.Error("a body over the fast path's limit (the fallback Transport) is said to be free")
	}
	h2, _ := NewPool([]string{srv.URL}, Options{H2C: true})
	if !h2.HoldsBody(h2.Backends()[0], 1000) {
		t.Error("the h2c Transport is said to free the body")
	}
	hs, _ := NewPool([]string{"https://127.0.0.1:9"}, Options{})
	if !hs.HoldsBody(hs.Backends()[0], 1000) {
		t.Error("an https:// backend (the fallback Transport) is said to free the body")
	}
	for i := range 20 {
		body := bytes.Repeat([]byte{byte('a' + i)}, 100+i*1000)
		want := fmt.Sprintf("POST /v1/chat/completions %d|%s", i, body)
		resp, err := p.Forward(context.Background(), b, http.MethodPost, "/v1/chat/completions", body, http.Header{"X-Test": {fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		clear(body) // reused by the caller the moment Forward returns
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("request %d: the backend got %.40q..., want %.40q...", i, got, want)
		}
	}
}

// TestForwardRefusesAnInvalidMethod: the request is built without
// NewRequestWithContext, so Forward checks the method itself, before
// anything is sent.
func TestForwardRefusesAnInvalidMethod(t *testing.T) {
	srv, conns := echoServer(t, nil)
	p, b := newTestPool(t, srv.URL, Options{})
	for _, m := range []string{"GET /x HTTP/1.1\r\nX:", "PO ST", "POST\n", "(POST)"} {
		resp, err := p.Forward(context.Background(), b, m, "/v1/chat/completions", []byte("{}"), nil)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("method %q was forwarded", m)
		}
		if !strings.Contains(err.Error(), "invalid method") {
			t.Fatalf("method %q: error %v does not name the method", m, err)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections for refused requests", n)
	}
	if got := forwardBody(t, p, b, "/x", []byte("ok"), nil); got != "POST /x |ok" {
		t.Fatalf("a valid request after them: %q", got)
	}
}

// TestForwardHeaderRules: Forward passes its caller's headers through but
// for the body's framing: Content-Encoding and Content-Length are left
// out (the body is decoded, its length is Forward's), a body is sent as
// application/json, and the caller's header is not changed. The fast path
// (which sends the caller's header without copying it) and net/http's
// transport (a body over the fast path's bound) agree.
func TestForwardHeaderRules(t *testing.T) {
	type seen struct {
		header http.Header
		n      int
	}
	got := make(chan seen, 1)
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got <- seen{r.Header.Clone(), int(n)}
	})
	p, b := newTestPool(t, srv.URL, Options{})
	for _, size := range []int{-1, 0, 10, maxFastBody + 1} {
		hdr := http.Header{"Content-Encoding": {"gzip"}, "Content-Length": {"99"}, "Content-Type": {"text/plain"},
			"X-Test": {"a", "b"}, "Authorization": {"Bearer t"}}
		before := hdr.Clone()
		var body []byte
		if size >= 0 {
			body = bytes.Repeat([]byte("x"), size)
		}
		resp, err := p.Forward(context.Background(), b, http.MethodPost, "/", body, hdr)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		s := <-got
		wantType := "application/json"
		if body == nil {
			wantType = "text/plain" // no body of Forward's: the caller's type stays
		}
		h := s.header
		if h.Get("Content-Type") != wantType || len(h["Content-Type"]) != 1 || h.Get("Content-Encoding") != "" ||
			strings.Join(h["X-Test"], ",") != "a,b" || h.Get("Authorization") != "Bearer t" || s.n != max(size, 0) {
			t.Fatalf("body of %d bytes: the backend saw %v and %d bytes", size, h, s.n)
		}
		if fmt.Sprint(hdr) != fmt.Sprint(before) {
			t.Fatalf("body of %d bytes: the caller's header changed to %v", size, hdr)
		}
	}
}

// maxFastBody is the largest body the HTTP/1.1 fast path takes.
const maxFastBody = 1 << 20

// TestForwardReadsALargeResponseHeader: the pool's HTTP/1.1 transport
// reads a response header of 2 MB, as net/http's Transport does (its
// default limit is 10 MiB), rather than fail the backend.
func TestForwardReadsALargeResponseHeader(t *testing.T) {
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Pad", strings.Repeat("p", 2<<20))
		io.WriteString(w, "ok")
	})
	p, b := newTestPool(t, srv.URL, Options{})
	if got := forwardBody(t, p, b, "/", []byte("x"), nil); got != "ok" {
		t.Fatalf("answer %q", got)
	}
}
