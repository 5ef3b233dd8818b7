//go:build unix

package backends

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"testing"
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
	tr := p.transport.(*h1Transport)
	tr.mu.Lock()
	for _, c := range tr.idle[b.URL.Host] {
		c.idleAt = c.idleAt.Add(-peekAfter) // old enough to be peeked at
	}
	tr.mu.Unlock()
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
	if len(conns) != 1 || conns[0] {
		t.Fatalf("connections used (reused?) %v: want one new connection, the closed one dropped before any write", conns)
	}
}
