package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// TestRequestTimeoutPassesDuringBody: a request timeout longer than the
// front door's watch delay, set before the body is read (the REST
// handler's order), whose deadline passes while the client is still
// sending the body. The front door leaves such a deadline to the body's
// end (arm) instead of arming its timer when the timeout is set; there it
// must end the request at once: a 504, and a backend that got the request
// (it should not) sees it cancelled. Both HTTP/1.1 servers behave alike.
func TestRequestTimeoutPassesDuringBody(t *testing.T) {
	var calls, cancelled atomic.Int32
	stop := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		calls.Add(1)
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			cancelled.Add(1)
		case <-stop: // the test failed: let the servers close
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stop) })
	const timeout = 40 * time.Millisecond // over the watch delay (10 ms)
	for _, stdlib := range []bool{false, true} {
		addr := frontRouterWith(t, server.Config{Backends: []string{hs.URL}, RequestTimeout: timeout, StdlibHTTP1: stdlib})
		raw := post("/v1/chat/completions", "Content-Type: application/json\r\nConnection: close\r\n", frontChat)
		head, body := raw[:len(raw)-len(frontChat)], frontChat
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a broken router must not hang the test
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		// The body follows once the deadline, counted from the request's
		// start, has passed.
		time.Sleep(3 * timeout)
		if _, err := io.WriteString(c, body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("net/http %v: %v", stdlib, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(msg), "timed out") {
			t.Errorf("net/http %v: %d %s; want a 504", stdlib, resp.StatusCode, msg)
		}
	}
	// A backend request, if one was made, ends with the router's.
	for range 1000 {
		if cancelled.Load() == calls.Load() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, k := calls.Load(), cancelled.Load(); n != k {
		t.Errorf("the backend got %d requests, %d of them cancelled", n, k)
	}
	t.Logf("backend requests: %d", calls.Load())
}
