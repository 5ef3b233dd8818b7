//go:build unix

package h1client

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestH1AwaitSeesABackendThatHalfClosedWhileIdle: a backend that answers,
// then half-closes the connection (its end of stream sent, its reads still
// open, as a server draining before its close does) and never answers on
// it again. Its end arrived before the next request's write, so before the
// wait for the answer began; the backend reads the request without a
// reset. The request must still see the end at once and go again on a new
// connection, as an ordinary read would, not wait out the header timeout.
func TestH1AwaitSeesABackendThatHalfClosedWhileIdle(t *testing.T) {
	halfClosed := make(chan struct{}, 1)
	url := rawServer(t, func(c net.Conn, n int) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, okAnswer)
		if n == 0 {
			c.(*net.TCPConn).CloseWrite()
			halfClosed <- struct{}{}
			io.Copy(io.Discard, c) // reads on, answers nothing, until the client closes
		}
	})
	// A request that waited for its answer in vain fails with this
	// timeout's error (forwardBody fails the test).
	p, b := newTestPool(t, url, Options{FirstByteTimeout: 5 * time.Second})
	if got := forwardBody(t, p, b, "/", []byte("x"), nil); got != "ok" {
		t.Fatalf("first request: %q", got)
	}
	<-halfClosed
	time.Sleep(5 * time.Millisecond) // the end crosses loopback
	if got := forwardBody(t, p, b, "/", []byte("y"), nil); got != "ok" {
		t.Fatalf("second request: %q", got)
	}
}

// TestH1StrayAnswerReachesNoLaterRequest: a backend that sends a second,
// unasked answer a moment after the first. Once it has arrived, a request
// that reused the connection would read it as its own answer; the peek
// before reuse finds the stray bytes and the request goes on a new
// connection.
func TestH1StrayAnswerReachesNoLaterRequest(t *testing.T) {
	strayed := make(chan struct{}, 1)
	url := rawServer(t, func(c net.Conn, n int) {
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if n > 0 {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
				continue
			}
			io.WriteString(c, okAnswer)
			time.Sleep(time.Millisecond) // after the client has read the first
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray")
			strayed <- struct{}{}
		}
	})
	p, b := newTestPool(t, url, Options{})
	if got := forwardBody(t, p, b, "/", []byte("x"), nil); got != "ok" {
		t.Fatalf("first request: %q", got)
	}
	<-strayed
	time.Sleep(5 * time.Millisecond) // the stray answer crosses loopback
	if got := forwardBody(t, p, b, "/", []byte("y"), nil); got != "second" {
		t.Fatalf("second request got %q, want the answer to it (\"second\"), not the stray one", got)
	}
}
