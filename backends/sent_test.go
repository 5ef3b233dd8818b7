package backends

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// readAndClose serves ln: each connection's request is read whole and the
// connection closed with no answer, as a backend that dies mid-request.
func readAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			io.Copy(io.Discard, req.Body)
		}
		c.Close()
	}
}

// refusedAddr is an address on which nothing listens.
func refusedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestUnreachableSaysWhetherSent: a backend that read the request and
// closed may have run it (Sent); one that refused the connection did not,
// on either transport.
func TestUnreachableSaysWhetherSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go readAndClose(ln)
	cases := []struct {
		name, addr string
		sent       bool
	}{
		{"read and closed", ln.Addr().String(), true},
		{"refused", refusedAddr(t), false},
	}
	for _, c := range cases {
		for _, fast := range []bool{true, false} {
			p, b := newTestPool(t, "http://"+c.addr, Options{})
			if !fast {
				p.transport = http.DefaultTransport.(*http.Transport).Clone()
			}
			_, err := p.Forward(context.Background(), b, http.MethodPost, "/v1/chat/completions", []byte(`{"model":"m"}`), nil)
			var ue *UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("%s, fast path %v: error %v; want *UnreachableError", c.name, fast, err)
			}
			if ue.Sent != c.sent {
				t.Errorf("%s, fast path %v: Sent = %v, want %v (%v)", c.name, fast, ue.Sent, c.sent, err)
			}
		}
	}
}
