//go:build unix

package h1client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestH1BackendThatHalfClosesAfterEachAnswer: a backend that answers,
// then half-closes the connection at once (its end of stream sent, its
// reads still open) without a Connection: close, on every connection.
// The next request comes right after the answer; the backend's end has
// arrived before it is written, so the connection is known closed and
// the request goes on a new one, without waiting out the header timeout
// (net/http's Transport, whose reader sees the end, does the same).
func TestH1BackendThatHalfClosesAfterEachAnswer(t *testing.T) {
	halfClosed := make(chan struct{}, 16)
	url := rawServer(t, func(c net.Conn, n int) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, okAnswer)
		c.(*net.TCPConn).CloseWrite()
		halfClosed <- struct{}{}
		io.Copy(io.Discard, c) // reads on, answers nothing, until the client closes
	})
	// A request that waited for its answer in vain fails with this
	// timeout's error.
	p, b := newTestPool(t, url, Options{FirstByteTimeout: 5 * time.Second})
	for i := range 5 {
		var reused []bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) },
		})
		resp, err := p.Forward(ctx, b, http.MethodPost, "/", []byte("x"), nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != "ok" {
			t.Fatalf("request %d: %q", i, got)
		}
		if i > 0 && (len(reused) == 0 || reused[len(reused)-1]) {
			t.Fatalf("request %d went out on connections (reused?) %v: want a new one last", i, reused)
		}
		<-halfClosed
		// The connection just answered is idle for under a millisecond:
		// nothing but a look at the connection itself can see its end.
		p.transport.mu.Lock()
		for _, c := range p.transport.idle[b.URL.Host] {
			c.idleAt = time.Now()
		}
		p.transport.mu.Unlock()
	}
}

// TestH1RequestReadAndUnansweredIsNotSentAgain: a backend that reads a
// reused connection's second request and closes it without answering.
// The request reached the backend, which may have run it: an LLM request
// is not idempotent, so it fails (502 for the router) and is not sent
// again, as net/http's Transport does for a POST.
func TestH1RequestReadAndUnansweredIsNotSentAgain(t *testing.T) {
	var requests atomic.Int32
	url := rawServer(t, func(c net.Conn, n int) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if requests.Add(1) == 2 {
				return // read, run, and closed without an answer
			}
			io.WriteString(c, okAnswer)
		}
	})
	p, b := newTestPool(t, url, Options{})
	if got := forwardBody(t, p, b, "/", []byte("x"), nil); got != "ok" {
		t.Fatalf("first request: %q", got)
	}
	resp, err := p.Forward(context.Background(), b, http.MethodPost, "/", []byte("y"), nil)
	if err == nil {
		resp.Body.Close()
	}
	if r := requests.Load(); r != 2 {
		t.Fatalf("the backend read %d requests, want 2: the unanswered one was sent again", r)
	}
	if err == nil || !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("err %v, want the connection's end before an answer", err)
	}
	if !errors.Is(err, ErrClosedOnReuse) {
		t.Fatalf("err %v, want it marked ErrClosedOnReuse: a reused connection ended unanswered", err)
	}
}

// TestH1StreamedAnswerThenCloseMarksTheNextRequest: a backend that, like
// llama.cpp's server, announces keep-alive on a chunked answer, shuts its
// side once the answer is written, and still reads the request that came
// in the meantime. The request sent at once on that connection fails
// marked ErrClosedOnReuse; a new connection that ends unanswered is not
// marked, since that one says the backend fails.
func TestH1StreamedAnswerThenCloseMarksTheNextRequest(t *testing.T) {
	url := rawServer(t, func(c net.Conn, n int) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if n == 1 {
			return // the new connection: read, closed without an answer
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
		// The end goes out only once the next request is read.
		http.ReadRequest(br)
		c.(*net.TCPConn).CloseWrite()
	})
	p, b := newTestPool(t, url, Options{})
	if got := forwardBody(t, p, b, "/", []byte("x"), nil); got != "ok" {
		t.Fatalf("first request: %q", got)
	}
	_, err := p.Forward(context.Background(), b, http.MethodPost, "/", []byte("y"), nil)
	if !errors.Is(err, ErrClosedOnReuse) {
		t.Fatalf("request on the closing connection: %v, want ErrClosedOnReuse", err)
	}
	_, err = p.Forward(context.Background(), b, http.MethodPost, "/", []byte("z"), nil)
	if err == nil || errors.Is(err, ErrClosedOnReuse) {
		t.Fatalf("request on a new connection that ended unanswered: %v, want an error not marked ErrClosedOnReuse", err)
	}
}
