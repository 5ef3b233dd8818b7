package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

func forwardBody(t *testing.T, p *testPool, b *Backend, path string, body []byte, hdr http.Header) string {
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

func TestH1ReusesOneConnectionAndKeepsBodiesIntact(t *testing.T) {
	srv, conns := echoServer(t, nil)
	p, b := newTestPool(t, srv.URL, Options{})
	for i, n := range []int{1, 100, 4095, 4096, 70_000, 300_000, maxPooledRequest, 5} {
		body := bytes.Repeat([]byte{byte('a' + i)}, n)
		hdr := http.Header{"X-Test": {fmt.Sprint(i)}}
		got := forwardBody(t, p, b, "/v1/chat/completions", body, hdr)
		want := fmt.Sprintf("POST /v1/chat/completions %d|%s", i, body)
		if got != want {
			t.Fatalf("request %d (%d bytes): answer is %d bytes, differs from the %d expected", i, n, len(got), len(want))
		}
	}
	if c := conns.Load(); c != 1 {
		t.Fatalf("%d connections for sequential requests, want 1 (keep-alive)", c)
	}
	// Over 1 MiB the body goes through net/http's Transport, intact.
	body := bytes.Repeat([]byte("0123456789"), maxPooledRequest/10+1)
	if got := forwardBody(t, p, b, "/big", body, nil); got != "POST /big |"+string(body) {
		t.Fatalf("a %d-byte body came back as %d bytes", len(body), len(got))
	}
}

func TestH1ConcurrentRequestsGetTheirOwnAnswers(t *testing.T) {
	srv, conns := echoServer(t, nil)
	p, b := newTestPool(t, srv.URL, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				body := []byte(fmt.Sprintf("g%d-i%d-%s", g, i, strings.Repeat("x", g*1000+i)))
				resp, err := p.Forward(context.Background(), b, http.MethodPost, "/p", body, nil)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(got) != "POST /p |"+string(body) {
					errs <- fmt.Errorf("goroutine %d request %d: err %v, answer of %d bytes is not its own", g, i, err, len(got))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if c := conns.Load(); c > 8 {
		t.Fatalf("%d connections for 8 concurrent callers, want at most 8", c)
	}
}

func TestH1ClosedIdleConnectionIsNotReused(t *testing.T) {
	srv, conns := echoServer(t, nil)
	p, b := newTestPool(t, srv.URL, Options{})
	forwardBody(t, p, b, "/a", []byte("1"), nil)
	srv.CloseClientConnections()
	// The server's end has arrived when CloseClientConnections returns:
	// the look before the write finds it, and the request goes on a new
	// connection.
	if got := forwardBody(t, p, b, "/a", []byte("2"), nil); got != "POST /a |2" {
		t.Fatalf("answer %q", got)
	}
	if c := conns.Load(); c != 2 {
		t.Fatalf("%d connections, want 2", c)
	}
}

// rawServer accepts connections and hands each to serve.
func rawServer(t *testing.T, serve func(c net.Conn, n int)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); serve(c, n) })
		}
	})
	return "http://" + ln.Addr().String()
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

func TestH1NewConnectionThatEndsUnansweredIsAnError(t *testing.T) {
	url := rawServer(t, func(c net.Conn, n int) {
		http.ReadRequest(bufio.NewReader(c))
	})
	p, b := newTestPool(t, url, Options{})
	_, err := p.Forward(context.Background(), b, http.MethodPost, "/", []byte("x"), nil)
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("err %v, want UnreachableError", err)
	}
}

func TestH1ConnectionCloseAndEarlyCloseAreNotReused(t *testing.T) {
	srv, conns := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		if r.URL.Path == "/chunked" {
			w.Write([]byte("part1"))
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, strings.Repeat("z", 100_000))
	})
	p, b := newTestPool(t, srv.URL, Options{})
	forwardBody(t, p, b, "/close", nil, nil)
	forwardBody(t, p, b, "/chunked", nil, nil) // a new connection; chunked, kept
	got := forwardBody(t, p, b, "/chunked", nil, nil)
	if len(got) != 100_005 || !strings.HasPrefix(got, "part1z") {
		t.Fatalf("chunked answer of %d bytes", len(got))
	}
	if c := conns.Load(); c != 2 {
		t.Fatalf("%d connections after a Connection: close answer and two chunked ones, want 2", c)
	}
	resp, err := p.Forward(context.Background(), b, http.MethodPost, "/x", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 10))
	resp.Body.Close() // before the end: the connection cannot be reused
	forwardBody(t, p, b, "/x", nil, nil)
	if c := conns.Load(); c != 3 {
		t.Fatalf("%d connections after a body closed early, want 3", c)
	}
}

func TestH1CancelAndHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	p, b := newTestPool(t, srv.URL, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err := p.Forward(ctx, b, http.MethodPost, "/", []byte("x"), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}

	p2, b2 := newTestPool(t, srv.URL, Options{FirstByteTimeout: 30 * time.Millisecond})
	_, err = p2.Forward(context.Background(), b2, http.MethodPost, "/", []byte("x"), nil)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no response header within 30ms") {
		t.Fatalf("err %v, want an UnreachableError naming the header timeout", err)
	}
}

func TestAppendRequestRefusesBrokenFraming(t *testing.T) {
	mk := func(body string, cl int64, hdr http.Header) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, "http://h/p", strings.NewReader(body))
		req.ContentLength = cl
		for k, v := range hdr {
			req.Header[k] = v
		}
		return req
	}
	for name, req := range map[string]*http.Request{
		"CRLF in a value":  mk("x", 1, http.Header{"X-A": {"a\r\nX-Injected: 1"}}),
		"colon in a name":  mk("x", 1, http.Header{"X:B": {"b"}}),
		"body too short":   mk("x", 2, nil),
		"body too long":    mk("xyz", 2, nil),
		"space in a name ": mk("x", 1, http.Header{"X B": {"b"}}),
	} {
		if _, err := appendRequest(nil, req); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	req := mk("hi", 2, http.Header{"Authorization": {"Bearer k"}, "Content-Length": {"99"}})
	msg, err := appendRequest(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(msg)))
	if err != nil {
		t.Fatalf("%q does not parse: %v", msg, err)
	}
	body, _ := io.ReadAll(parsed.Body)
	if parsed.Host != "h" || parsed.ContentLength != 2 || string(body) != "hi" || parsed.Header.Get("Authorization") != "Bearer k" {
		t.Fatalf("parsed back as host %q, length %d, body %q, headers %v", parsed.Host, parsed.ContentLength, body, parsed.Header)
	}
}

func TestH1CancelMidBodyIsTheContextsError(t *testing.T) {
	release := make(chan struct{})
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first part")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	p, b := newTestPool(t, srv.URL, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := p.Forward(ctx, b, http.MethodPost, "/", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || string(buf[:n]) != "first part" {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	cancel()
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
}

func TestH1PeekKeepsAConnectionStillOpen(t *testing.T) {
	srv, conns := echoServer(t, nil)
	p, b := newTestPool(t, srv.URL, Options{})
	forwardBody(t, p, b, "/", []byte("x"), nil)
	forwardBody(t, p, b, "/", []byte("y"), nil)
	if c := conns.Load(); c != 1 {
		t.Fatalf("%d connections: the peek dropped a connection the backend still held open", c)
	}
}

// TestH1LargeResponseHeaderIsRead: a response header of 2 MB is read, as
// net/http's Transport reads one up to its default limit of 10 MiB; one
// over the limit is refused.
func TestH1LargeResponseHeaderIsRead(t *testing.T) {
	url := rawServer(t, func(c net.Conn, n int) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		lines := 2000 // 2 MB
		if req.URL.Path == "/over" {
			lines = 10600 // over 10 MiB
		}
		w := bufio.NewWriter(c)
		w.WriteString("HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		for range lines {
			w.WriteString(line)
		}
		w.WriteString("Content-Length: 2\r\n\r\nok")
		w.Flush()
	})
	p, b := newTestPool(t, url, Options{})
	if got := forwardBody(t, p, b, "/", []byte("x"), nil); got != "ok" {
		t.Fatalf("answer %q", got)
	}
	_, err := p.Forward(context.Background(), b, http.MethodPost, "/over", []byte("x"), nil)
	if !errors.Is(err, errHeaderTooLarge) {
		t.Fatalf("err %v, want errHeaderTooLarge", err)
	}
}
