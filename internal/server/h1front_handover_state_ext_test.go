package server_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// TestFrontHandoverKeepsWhatWasSpoken: a connection that has spoken
// HTTP/1.1 with the front door and is then handed to net/http keeps what
// net/http would have made of it, compared byte for byte with a router
// without the front door: a CRLF after a POST is tolerated (net/http's
// allowance for old clients), and the HTTP/2 preface after HTTP/1.1
// requests is an HTTP/1.1 request, not the start of an HTTP/2 connection.
func TestFrontHandoverKeepsWhatWasSpoken(t *testing.T) {
	backend := answeringBackend(t)
	fast := frontRouter(t, backend.URL, false)
	std := frontRouter(t, backend.URL, true)
	closeReq := "GET /healthz HTTP/1.1\r\nHost: router\r\nConnection: close\r\n\r\n"
	for _, tc := range []struct{ name, raw string }{
		{"CRLF after a POST", post("/v1/chat/completions", "", frontChat) + "\r\n" + closeReq},
		{"CRLF after a POST, then handed over", post("/v1/chat/completions", "", frontChat) + "\r\nGET /v1/models?x=1 HTTP/1.1\r\nHost: router\r\n\r\n" + closeReq},
		{"h2c preface after HTTP/1.1", "GET /healthz HTTP/1.1\r\nHost: router\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
	} {
		got, want := exchange(t, fast, tc.raw), exchange(t, std, tc.raw)
		if len(want) == 0 {
			t.Errorf("%s: net/http answered nothing", tc.name)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n front door: %q\n net/http:   %q", tc.name, got, want)
		}
	}
}

// TestFrontHandoverKeepsTheHeadDeadline: a head that began at the front
// door and is handed to net/http part way (it outgrew the front door's
// buffer) must still be whole by the header timeout counted from the
// connection's start, as net/http alone counts it; net/http's own clock
// starts at the handover, so the head would otherwise get more time.
func TestFrontHandoverKeepsTheHeadDeadline(t *testing.T) {
	const timeout = 600 * time.Millisecond
	// Restored after the routers have stopped (cleanups run last first).
	t.Cleanup(server.SetHeaderTimeout(timeout))
	backend := answeringBackend(t)
	for _, stdlib := range []bool{true, false} {
		addr := frontRouter(t, backend.URL, stdlib)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a broken router must not hang the test
		// Two thirds of the timeout in, the head outgrows the front
		// door's buffer; two thirds later, past the timeout, it ends.
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: router\r\n")
		time.Sleep(2 * timeout / 3)
		_, _ = io.WriteString(c, "X-Pad: "+strings.Repeat("p", 9000)+"\r\n")
		time.Sleep(2 * timeout / 3)
		_, _ = io.WriteString(c, "Connection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err == nil {
			resp.Body.Close()
			t.Errorf("stdlib=%v: a head completed past the header timeout was answered %s", stdlib, resp.Status)
		} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("stdlib=%v: the router never closed the connection", stdlib)
		}
	}
}

// TestFrontClearsAHandlersWriteDeadline: a write deadline a handler set
// through http.ResponseController ends with its request, as net/http's
// server clears it: the next request on the connection, here or handed
// over, is not cut by it.
func TestFrontClearsAHandlersWriteDeadline(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
			_, _ = io.WriteString(w, "first")
			return
		}
		time.Sleep(60 * time.Millisecond) // past the first request's write deadline
		_, _ = io.WriteString(w, "second "+r.URL.RawQuery)
	})
	raws := []string{
		"GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
		"GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz?handed=over HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := server.ServeFrontDoor(h, ln)
	defer stop()
	for _, raw := range raws {
		got := exchange(t, ln.Addr().String(), raw)
		if len(got) != 2 || !strings.Contains(got[1], `body="second`) {
			t.Errorf("%q:\n%s\nwant two answers, the second one whole", raw, strings.Join(got, "\n"))
		}
	}
}
