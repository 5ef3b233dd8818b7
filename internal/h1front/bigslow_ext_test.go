package h1front_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/h1front"
)

// TestFrontBigReadThenSlowHeadIsCut: after a request larger than the
// front door's own buffer (whole in one read, and then one in two reads),
// the connection's next read goes to a big buffer (readBig); a client
// that then sends a head's first bytes and nothing more is cut by the
// header timeout, as after a small request: the deadline left in place
// by the request read whole, or cleared for the one that was not, is
// replaced by the head's own.
func TestFrontBigReadThenSlowHeadIsCut(t *testing.T) {
	const head = 30 * time.Millisecond
	defer h1front.SetHeaderTimeout(head)()
	addr := serveAttack(t, sumHandler())
	big := "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 16384\r\n\r\n" + strings.Repeat("x", 16384)
	for _, split := range []bool{false, true} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a broken front door must not hang the test
		br := bufio.NewReader(c)
		parts := []string{big}
		if split {
			parts = []string{big[:100], big[100:]} // the body's rest after the head's read
		}
		for _, p := range parts {
			if _, err := io.WriteString(c, p); err != nil {
				t.Fatal(err)
			}
			if split {
				time.Sleep(head / 6)
			}
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(string(b), "16384 ") {
			t.Fatalf("answer %q", b)
		}
		if _, err := io.WriteString(c, "POST /v1/chat"); err != nil {
			t.Fatal(err)
		}
		// The front door closes the connection: the read ends with EOF,
		// not with this client's own deadline.
		if n, err := br.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("split %v: after a head's first bytes, read %d bytes, %v; want the connection closed", split, n, err)
		}
		c.Close()
	}
}
