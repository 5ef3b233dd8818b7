package h1front_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestFrontSlowBodyPinsNoBigBuffer: a client whose last request was
// larger than the front door's own buffer (so its next one is read into a
// pooled 64 KiB buffer) sends a head that announces a long body, a few
// bytes of it, then nothing. The handler has read what arrived and waits
// for the rest, as long as the client likes (a body has no read
// deadline). That wait must hold the connection's own buffer only, not a
// 64 KiB one: conns such clients would pin conns × 64 KiB. The heap in
// use is measured with every connection waiting so, against a bound of
// half a big buffer per connection (its own 8 KiB buffer, its request's
// objects and its goroutine's share fit well under it).
func TestFrontSlowBodyPinsNoBigBuffer(t *testing.T) {
	const conns, arrived = 48, 100
	waiting := make(chan struct{}, conns)
	addr := serveAttack(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength < 20000 {
			io.Copy(io.Discard, r.Body)
			return
		}
		if _, err := io.ReadFull(r.Body, make([]byte, arrived)); err != nil {
			return
		}
		waiting <- struct{}{}
		// Until the client sends the rest or leaves; a small buffer, not
		// io.Copy's, so that the heap measured is the front door's.
		var buf [256]byte
		for {
			if _, err := r.Body.Read(buf[:]); err != nil {
				return
			}
		}
	}))
	var ms runtime.MemStats
	heap := func() int64 {
		runtime.GC()
		runtime.GC() // the pools' second generation too
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapInuse)
	}
	before := heap()
	big := "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 9000\r\n\r\n" + strings.Repeat("x", 9000)
	slow := "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 30000\r\n\r\n" + strings.Repeat("y", arrived)
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a broken front door must not hang the test
		if _, err := io.WriteString(c, big); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if _, err := io.WriteString(c, slow); err != nil {
			t.Fatal(err)
		}
	}
	for range conns {
		<-waiting
	}
	grew := heap() - before
	t.Logf("heap in use grew by %d KiB for %d connections waiting for a body (%d KiB each)", grew>>10, conns, grew/conns>>10)
	if limit := int64(conns) * (32 << 10); grew > limit {
		t.Fatalf("heap in use grew by %d KiB for %d connections waiting for a body, over %d KiB: each holds a big buffer",
			grew>>10, conns, limit>>10)
	}
}
