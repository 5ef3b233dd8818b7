package h1front

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFrontHeadIsPlainWithinItsBuffer: a head longer than the front
// door's own buffer goes to net/http even when it arrives in the larger
// buffer a connection with big requests reads into (readBig), so that
// what is plain does not depend on which buffer the bytes landed in.
func TestFrontHeadIsPlainWithinItsBuffer(t *testing.T) {
	// The answer says which server read the request: the front door's
	// requests carry its own context type.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		_, front := r.Context().(*requestContext)
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10)+" "+strconv.FormatBool(front))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := New(ln, Config{Handler: handler, HeaderTimeout: 10 * time.Second, MaxBodyBytes: 1 << 20})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(f) }()
	go func() { _ = f.Run() }()
	defer func() { _ = srv.Close(); _ = f.Close() }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a broken front door must not hang the test
	br := bufio.NewReader(c)
	ask := func(extra string, size int, front bool) {
		t.Helper()
		req := "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n" + extra + "Content-Length: " + strconv.Itoa(size) +
			"\r\n\r\n" + strings.Repeat("x", size)
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := strconv.Itoa(size) + " " + strconv.FormatBool(front); string(b) != want {
			t.Fatalf("answer %q, want %q (body size, served by the front door)", b, want)
		}
	}
	ask("", 20000, true)              // big: the next read goes to a big buffer
	time.Sleep(10 * time.Millisecond) // the head below arrives in one piece, read whole into it
	ask("X-Big: "+strings.Repeat("b", h1ReadBuffer)+"\r\n", 10, false)
}
