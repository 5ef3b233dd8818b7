//go:build unix

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
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

func TestH1PeekDropsAConnectionClosedWhileIdle(t *testing.T) {
	closed := make(chan struct{}, 1)
	url := rawServer(t, func(c net.Conn, n int) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, okAnswer)
		c.Close() // an idle keep-alive timing out, without a Connection: close
		closed <- struct{}{}
	})
	p, b := newTestPool(t, url, Options{})
	forwardBody(t, p, b, "/", []byte("x"), nil)
	<-closed
	var conns []bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { conns = append(conns, i.Reused) },
	})
	resp, err := p.Forward(ctx, b, http.MethodPost, "/", []byte("y"), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The closed one is taken, found closed before a byte is written, and
	// dropped; the request goes on a new one.
	if len(conns) != 2 || !conns[0] || conns[1] {
		t.Fatalf("connections used (reused?) %v: want the idle one, then a new one", conns)
	}
}

// TestH1AwaitNeverMissesAnInstantAnswer sends requests to a backend that
// answers each one the moment it has read it, over several connections
// at once and many times in a row: an answer that arrived between the
// write and the wait (writeAndAwait) must still wake the wait, or a
// request would hang here until the test's own timeout.
func TestH1AwaitNeverMissesAnInstantAnswer(t *testing.T) {
	url := rawServer(t, func(c net.Conn, n int) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if _, err := io.WriteString(c, okAnswer); err != nil {
				return
			}
		}
	})
	p, b := newTestPool(t, url, Options{})
	const workers, each = 4, 500
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			body := bytes.Repeat([]byte{'a' + byte(w)}, 10+w*3000) // one, two and more segments
			for i := range each {
				resp, err := p.Forward(context.Background(), b, http.MethodPost, "/", body, nil)
				if err != nil {
					errs <- fmt.Errorf("worker %d, request %d: %w", w, i, err)
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(got) != "ok" {
					errs <- fmt.Errorf("worker %d, request %d: %q, %v", w, i, got, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestH1AwaitSeesABackendThatClosedWhileIdle: a reused connection whose
// backend closed it since its last answer (its end arrived before the
// write, so before the wait began) is woken by the reset the write
// brings, and the request goes again on a new connection.
func TestH1AwaitSeesABackendThatClosedWhileIdle(t *testing.T) {
	closed := make(chan struct{}, 1)
	url := rawServer(t, func(c net.Conn, n int) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, okAnswer)
		c.Close()
		closed <- struct{}{}
	})
	p, b := newTestPool(t, url, Options{})
	for i := range 20 {
		if got := forwardBody(t, p, b, "/", []byte("x"), nil); got != "ok" {
			t.Fatalf("request %d: %q", i, got)
		}
		<-closed // closed before the next request is written
	}
}

// TestH1AwaitIsCutByCancelAndHeaderTimeout: the wait for the answer
// obeys the request's cancellation and the first-byte timeout.
func TestH1AwaitIsCutByCancelAndHeaderTimeout(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	url := rawServer(t, func(c net.Conn, n int) {
		http.ReadRequest(bufio.NewReader(c))
		<-hold // never answers
	})
	p, b := newTestPool(t, url, Options{FirstByteTimeout: 20 * time.Millisecond})
	_, err := p.Forward(context.Background(), b, http.MethodPost, "/", []byte("x"), nil)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no response header within 20ms") {
		t.Fatalf("err %v, want an UnreachableError naming the header timeout", err)
	}
	p2, b2 := newTestPool(t, url, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := p2.Forward(ctx, b2, http.MethodPost, "/", []byte("x"), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	// Canceled before the request is sent: nothing waits at all.
	if _, err := p2.Forward(ctx, b2, http.MethodPost, "/", []byte("x"), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v after cancel, want context.Canceled", err)
	}
}

// TestH1StaleHeaderDeadlineDoesNotFailThePeek: an answer read whole with
// its header leaves the header timeout's deadline on the connection (no
// second deadline call); once it has passed, a reuse that peeks must
// clear it first, or the peek would fail on it and drop a good
// connection.
func TestH1StaleHeaderDeadlineDoesNotFailThePeek(t *testing.T) {
	url := rawServer(t, func(c net.Conn, n int) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, okAnswer)
		}
	})
	p, b := newTestPool(t, url, Options{FirstByteTimeout: 5 * time.Millisecond})
	forwardBody(t, p, b, "/", []byte("x"), nil)
	time.Sleep(20 * time.Millisecond) // past the deadline left in place
	var conns []bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { conns = append(conns, i.Reused) },
	})
	resp, err := p.Forward(ctx, b, http.MethodPost, "/", []byte("y"), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if len(conns) != 1 || !conns[0] {
		t.Fatalf("connections used (reused?) %v: want the idle one reused", conns)
	}
}

// TestH1AwaitHandsAPartialWriteOn: a request larger than the socket
// buffers take at once (a small send buffer, a backend that reads late)
// is written partly by writeAndAwait and the rest by the ordinary write;
// the backend gets every byte and the answer comes back.
func TestH1AwaitHandsAPartialWriteOn(t *testing.T) {
	got := make(chan int, 2)
	url := rawServer(t, func(c net.Conn, n int) {
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			if i == 1 {
				time.Sleep(20 * time.Millisecond) // the sender's buffers fill first
			}
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			got <- len(b)
			io.WriteString(c, okAnswer)
		}
	})
	p, b := newTestPool(t, url, Options{})
	forwardBody(t, p, b, "/", []byte("x"), nil)
	<-got
	tr := p.transport
	tr.mu.Lock()
	idle := tr.idle[b.URL.Host]
	if len(idle) != 1 {
		tr.mu.Unlock()
		t.Fatalf("%d idle connections, want 1", len(idle))
	}
	c := idle[0] // the transport clears its slot when it takes it
	tr.mu.Unlock()
	tc := c.conn.(*net.TCPConn)
	if err := tc.SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("z"), maxPooledRequest) // the fast path's largest
	written := 0
	c.await.f = func(fd uintptr) bool { // count what the raw writes took
		done := c.awaitStep(fd)
		written = c.await.n
		return done
	}
	if got := forwardBody(t, p, b, "/", body, nil); got != "ok" {
		t.Fatalf("answer %q", got)
	}
	if n := <-got; n != len(body) {
		t.Fatalf("the backend read %d body bytes, want %d", n, len(body))
	}
	t.Logf("the raw writes took %d of %d bytes", written, len(body))
	if written == 0 || written >= len(body) {
		t.Fatalf("the raw writes took %d of %d bytes: the test meant a partial write", written, len(body))
	}
}
