package server_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// frontRouter serves a router in front of backend through Serve, with the
// front door on (fast) or off, and returns its address.
func frontRouter(t *testing.T, backend string, stdlib bool) string {
	t.Helper()
	return frontRouterWith(t, server.Config{Backends: []string{backend}, StdlibHTTP1: stdlib})
}

// frontRouterWith serves a router with cfg through Serve and returns its
// address.
func frontRouterWith(t *testing.T, cfg server.Config) string {
	t.Helper()
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// answeringBackend answers every completion with a fixed JSON answer, or
// with a stream of three events when the body asks for one.
func answeringBackend(t *testing.T) *httptest.Server {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/chat/completions", "/v1/completions":
		default:
			return
		}
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"w%d\"}}]}\n\n", i)
				w.(http.Flusher).Flush()
			}
			io.WriteString(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// exchange writes raw on a new connection and reads answers until the
// router closes it (the last request says Connection: close, or the
// router closes after an error). The deadline only keeps a broken router
// from hanging the test.
func exchange(t *testing.T, addr, raw string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var got []string
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if _, more := br.Peek(1); more == nil {
				got = append(got, "unreadable answer: "+err.Error())
			}
			return got
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			got = append(got, "body: "+err.Error())
			return got
		}
		got = append(got, describe(resp, body))
	}
}

// describe is what the front door must keep of an answer: status, the
// headers a client reads, framing and body. Date and the request id
// change per request.
func describe(resp *http.Response, body []byte) string {
	b := strings.Builder{}
	fmt.Fprintf(&b, "%s %s", resp.Proto, resp.Status)
	for _, h := range []string{"Content-Type", "Allow", "Retry-After", "Connection", "X-Prefixgate-Backend", "X-Prefixgate-Decision"} {
		if v := resp.Header.Values(h); len(v) > 0 {
			fmt.Fprintf(&b, " %s=%q", h, v)
		}
	}
	if resp.Header.Get("Date") == "" || resp.Header.Get("X-Request-Id") == "" {
		b.WriteString(" (no Date or X-Request-Id)")
	}
	fmt.Fprintf(&b, " chunked=%v close=%v body=%q", len(resp.TransferEncoding) > 0, resp.Close, body)
	return b.String()
}

func gzipped(s string) string {
	var b strings.Builder
	zw := gzip.NewWriter(&b)
	_, _ = io.WriteString(zw, s)
	_ = zw.Close()
	return b.String()
}

func post(path, headers, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: router\r\n%sContent-Length: %d\r\n\r\n%s", path, headers, len(body), body)
}

const frontChat = `{"model":"m","messages":[{"role":"user","content":"hello"}]}`

// bigChat is larger than the front door's read buffer.
var bigChat = `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("many words ", 10000) + `"}]}`

// TestFrontAnswersAsNetHTTP sends the same bytes to a router with the
// front door and one without, and compares what comes back: plain
// requests, pipelined ones, requests the front door hands to net/http
// (smuggling attempts, framing it does not take, h2c's preface) and
// errors.
func TestFrontAnswersAsNetHTTP(t *testing.T) {
	backend := answeringBackend(t)
	fast := frontRouter(t, backend.URL, false)
	std := frontRouter(t, backend.URL, true)
	closeReq := "GET /healthz HTTP/1.1\r\nHost: router\r\nConnection: close\r\n\r\n"
	stream := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	cases := []struct{ name, raw string }{
		{"chat then close", post("/v1/chat/completions", "Content-Type: application/json\r\n", frontChat) + closeReq},
		{"keep-alive, three", post("/v1/chat/completions", "", frontChat) + post("/v1/completions", "", `{"model":"m","prompt":"hi"}`) + post("/v1/chat/completions", "Connection: close\r\n", frontChat)},
		{"stream", post("/v1/chat/completions", "", stream) + closeReq},
		{"bad JSON", post("/v1/chat/completions", "", `{"model":`) + closeReq},
		{"not JSON", post("/v1/chat/completions", "Content-Type: text/plain\r\n", frontChat) + closeReq},
		{"wrong method", "GET /v1/chat/completions HTTP/1.1\r\nHost: router\r\n\r\n" + closeReq},
		{"unread body on an error", post("/v1/chat/completions", "Content-Type: text/plain\r\n", strings.Repeat("x", 70000)) + closeReq},
		{"models and readyz", "GET /v1/models HTTP/1.1\r\nHost: router\r\n\r\nGET /readyz HTTP/1.1\r\nHost: router\r\n\r\n" + closeReq},
		{"unknown path", "GET /nothing HTTP/1.1\r\nHost: router\r\n\r\n" + closeReq},
		{"query string", "GET /v1/models?x=1 HTTP/1.1\r\nHost: router\r\n\r\n" + closeReq},
		{"chunked body", "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(frontChat), frontChat) + closeReq},
		{"plain, then chunked", post("/v1/chat/completions", "", frontChat) + "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(frontChat), frontChat) + closeReq},
		{"CL and TE", "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(frontChat), frontChat) + closeReq},
		{"two lengths", "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Length: 2\r\nContent-Length: 60\r\n\r\n" + frontChat + closeReq},
		{"signed length", "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Length: +60\r\n\r\n" + frontChat + closeReq},
		{"obs-fold", "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nX-A: a\r\n b\r\nContent-Length: 60\r\n\r\n" + frontChat + closeReq},
		{"bare LF", "POST /v1/chat/completions HTTP/1.1\nHost: router\nContent-Length: 60\n\n" + frontChat + closeReq},
		{"no host", "GET /healthz HTTP/1.1\r\n\r\n" + closeReq},
		{"HTTP/1.0", "GET /healthz HTTP/1.0\r\n\r\n"},
		{"expect", "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nExpect: 100-continue\r\nContent-Length: 60\r\n\r\n" + frontChat + closeReq},
		{"large body", post("/v1/chat/completions", "", bigChat) + closeReq},
		{"gzip body", post("/v1/chat/completions", "Content-Encoding: gzip\r\n", gzipped(frontChat)) + closeReq},
		{"unknown encoding", post("/v1/chat/completions", "Content-Encoding: br2\r\n", frontChat) + closeReq},
		{"large header, handed over", "GET /healthz HTTP/1.1\r\nHost: router\r\nX-Big: " + strings.Repeat("b", 20<<10) + "\r\n\r\n" + closeReq},
		{"header over net/http's limit", "GET /healthz HTTP/1.1\r\nHost: router\r\nX-Big: " + strings.Repeat("b", 80<<10) + "\r\n\r\n" + closeReq},
		{"many headers", "GET /healthz HTTP/1.1\r\nHost: router\r\n" + strings.Repeat("X-A: b\r\n", 100) + "\r\n" + closeReq},
		// h2c (TestGRPCGoClientChat) and 413's lingering close
		// (TestOversizedBodyReadsBack413) are handed over too, and tested
		// through Serve where they are.
	}
	if len(frontChat) != 60 {
		t.Fatalf("frontChat is %d bytes; the raw cases say 60", len(frontChat))
	}
	for _, tc := range cases {
		got, want := exchange(t, fast, tc.raw), exchange(t, std, tc.raw)
		if len(want) == 0 {
			t.Errorf("%s: net/http answered nothing", tc.name)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n front door: %q\n net/http:   %q", tc.name, got, want)
		}
	}
	// The front door did serve: plain requests were counted.
	_, _, body := call(t, http.MethodGet, "http://"+fast+"/metrics", "", nil, nil)
	if !strings.Contains(string(body), "prefixgate_http1_front_requests_total ") ||
		strings.Contains(string(body), "prefixgate_http1_front_requests_total 0\n") {
		t.Errorf("no request counted as served by the front door")
	}
}

// TestFrontHeaderTimeout: a head that has begun, a new connection that
// sends nothing, and a head sent a byte at a time all end at the header
// timeout (slowloris), with or without the front door.
func TestFrontHeaderTimeout(t *testing.T) {
	// Registered first, so it runs after the routers below have stopped:
	// they read the timeout while they serve.
	t.Cleanup(server.SetHeaderTimeout(300 * time.Millisecond))
	backend := answeringBackend(t)
	for _, stdlib := range []bool{false, true} {
		addr := frontRouter(t, backend.URL, stdlib)
		head := "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Length: 60\r\n\r\n"
		for _, tc := range []struct {
			name  string
			send  string
			trick bool // one byte every 50 ms, the whole head
		}{
			{"partial head", head[:30], false},
			{"nothing", "", false},
			{"trickle", head, true},
		} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			closed := make(chan error, 1)
			go func() {
				_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a broken router must not hang the test
				_, err := io.ReadAll(c)
				closed <- err
			}()
			if tc.trick {
				for i := 0; i < len(tc.send); i++ {
					if _, err := c.Write([]byte{tc.send[i]}); err != nil {
						break // closed by the router
					}
					time.Sleep(50 * time.Millisecond)
				}
			} else {
				_, _ = io.WriteString(c, tc.send)
			}
			err = <-closed
			c.Close()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("stdlib=%v %s: still open after %v; the router never closed it", stdlib, tc.name, time.Since(start))
			}
			if tc.trick && time.Since(start) >= time.Duration(len(head))*50*time.Millisecond {
				t.Errorf("stdlib=%v trickle: the whole head was accepted one byte at a time", stdlib)
			}
		}
	}
}

// TestFrontClientIdleTimeout: a keep-alive connection that has been
// answered and then sends nothing is closed at the client idle timeout,
// with or without the front door, while one that keeps sending requests
// more often than that stays open across several timeouts' worth of time.
func TestFrontClientIdleTimeout(t *testing.T) {
	backend := answeringBackend(t)
	// Ten times the gap between requests, so that a loaded machine's
	// scheduling delays do not make a busy connection look idle.
	const idle = time.Second
	for _, stdlib := range []bool{false, true} {
		addr := frontRouterWith(t, server.Config{Backends: []string{backend.URL}, StdlibHTTP1: stdlib, ClientIdleTimeout: idle})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a broken router must not hang the test
		br := bufio.NewReader(c)
		for i := range 4 { // 4 requests 100 ms apart: busy, never idle for long
			if i > 0 {
				time.Sleep(idle / 10)
			}
			if _, err := io.WriteString(c, post("/v1/chat/completions", "", frontChat)); err != nil {
				t.Fatalf("stdlib=%v request %d: %v", stdlib, i, err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("stdlib=%v request %d: %v", stdlib, i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stdlib=%v request %d: status %d", stdlib, i, resp.StatusCode)
			}
		}
		start := time.Now()
		_, err = br.ReadByte()
		c.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("stdlib=%v: idle connection still open after %v; the router never closed it", stdlib, time.Since(start))
		} else if err != io.EOF && !errors.Is(err, net.ErrClosed) && !strings.Contains(fmt.Sprint(err), "reset") {
			t.Errorf("stdlib=%v: idle connection: want EOF, got %v", stdlib, err)
		}
	}
}

// TestFrontHangupCancelsBackend: a client that hangs up while its plain
// request waits for the backend cancels the backend's request, as
// net/http's background read did.
func TestFrontHangupCancelsBackend(t *testing.T) {
	arrived, cancelled, stop := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		// Reading the body to its end starts net/http's watch for the
		// router hanging up (as vLLM's server has one).
		_, _ = io.ReadAll(r.Body)
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-stop: // the test failed: let the servers close
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stop) })
	addr := frontRouter(t, hs.URL, false)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, post("/v1/chat/completions", "", frontChat)); err != nil {
		t.Fatal(err)
	}
	<-arrived
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second): // the request timeout is 5 minutes
		t.Fatal("the backend's request was not cancelled after the client hung up")
	}
}

// TestFrontShutdownClosesIdle: at shutdown a keep-alive connection that
// waits between requests is closed, a request in flight is answered with
// Connection: close, and Serve returns.
func TestFrontShutdownClosesIdle(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "hold") {
			arrived <- struct{}{}
			<-release
		}
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	}))
	t.Cleanup(hs.Close)
	srv, err := server.New(server.Config{Backends: []string{hs.URL}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, 10*time.Second) }()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // only against a hang
		return c, bufio.NewReader(c)
	}
	idle, idleR := dial()
	defer idle.Close()
	if _, err := io.WriteString(idle, post("/v1/chat/completions", "", frontChat)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(idleR, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("before shutdown: %d, close %v", resp.StatusCode, resp.Close)
	}
	busy, busyR := dial()
	defer busy.Close()
	held := `{"model":"m","messages":[{"role":"user","content":"hold"}]}`
	if _, err := io.WriteString(busy, post("/v1/chat/completions", "", held)); err != nil {
		t.Fatal(err)
	}
	<-arrived
	cancel()
	if _, err := idleR.ReadByte(); err != io.EOF {
		t.Errorf("idle connection at shutdown: %v; want it closed (EOF)", err)
	}
	close(release)
	resp, err = http.ReadResponse(busyR, nil)
	if err != nil {
		t.Fatalf("the request in flight at shutdown: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("the request in flight at shutdown: %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestFrontRequestTimeout: past the request timeout a request waiting on
// its backend gets a 504 and the backend's request is cancelled, through
// the front door as through net/http's server: with a timeout shorter
// than the front door's watch delay and a longer one, for a lone request
// and for one followed by pipelined bytes (which skips the watch).
func TestFrontRequestTimeout(t *testing.T) {
	var received, cancelled atomic.Int32
	stop := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		received.Add(1)
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			cancelled.Add(1)
		case <-stop: // the test failed: let the servers close
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stop) })
	next := "GET /healthz HTTP/1.1\r\nHost: router\r\nConnection: close\r\n\r\n"
	for _, timeout := range []time.Duration{5 * time.Millisecond, 100 * time.Millisecond} {
		for _, stdlib := range []bool{false, true} {
			addr := frontRouterWith(t, server.Config{Backends: []string{hs.URL}, RequestTimeout: timeout, StdlibHTTP1: stdlib})
			for _, pipelined := range []bool{false, true} {
				name := fmt.Sprintf("timeout %s, net/http %v, pipelined %v", timeout, stdlib, pipelined)
				raw := post("/v1/chat/completions", "Content-Type: application/json\r\nConnection: close\r\n", frontChat)
				if pipelined {
					raw = post("/v1/chat/completions", "Content-Type: application/json\r\n", frontChat) + next
				}
				got := exchange(t, addr, raw)
				if len(got) == 0 || !strings.Contains(got[0], "504 Gateway Timeout") || !strings.Contains(got[0], "timed out") {
					t.Errorf("%s: %q; want a 504 first", name, got)
				}
				// Every request that reached the backend is cancelled there
				// (on a loaded machine a 5 ms timeout can pass before the
				// router has even connected, and then nothing reached it).
				for wait := time.Now(); cancelled.Load() != received.Load(); time.Sleep(5 * time.Millisecond) {
					if time.Since(wait) > 10*time.Second {
						t.Fatalf("%s: %d requests reached the backend, %d were cancelled", name, received.Load(), cancelled.Load())
					}
				}
			}
		}
	}
}
