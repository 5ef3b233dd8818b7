package h1front_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/h1front"
)

// TestFrontStaleHeadDeadlineEndsNothing: a request read whole leaves the
// deadline its head was read under in place (one deadline call per
// request, not two). That deadline must not end the request's watch read,
// and with it the request, when the handler outlasts it, nor the wait for
// the connection's next request when the client pauses past it.
func TestFrontStaleHeadDeadlineEndsNothing(t *testing.T) {
	const head = 30 * time.Millisecond
	defer h1front.SetHeaderTimeout(head)()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/completions" { // slow: past the head's deadline
			select {
			case <-r.Context().Done():
				_, _ = io.WriteString(w, "canceled")
				return
			case <-time.After(4 * head):
			}
		}
		_, _ = io.WriteString(w, "ok")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer h1front.ServeFrontDoor(handler, ln)()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a broken front door must not hang the test
	br := bufio.NewReader(c)
	ask := func(step, path string, split bool) {
		t.Helper()
		req := "POST " + path + " HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"
		if split {
			// A head that arrives in two reads is read under the header
			// timeout's deadline.
			if _, err := io.WriteString(c, req[:10]); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			time.Sleep(head / 6)
			req = req[10:]
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "ok" {
			t.Fatalf("%s: %d %q, want ok", step, resp.StatusCode, body)
		}
	}
	ask("a slow first request, past the accept's head deadline", "/v1/completions", false)
	ask("a fast request, its head in two reads", "/v1/chat/completions", true)
	time.Sleep(3 * head) // the fast request's head deadline passes while idle
	ask("a request after a pause", "/v1/chat/completions", false)
	ask("a slow request, its head in two reads", "/v1/completions", true)
}
