//go:build linux

package h1front_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readCalls is this process's count of read system calls so far (syscr in
// /proc/self/io), those that found nothing included.
func readCalls(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no read counts: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("syscr %q: %v", v, err)
			}
			return n
		}
	}
	t.Skip("no syscr in /proc/self/io")
	return 0
}

// TestFrontBigRequestTakesOneRead counts the process's read system calls
// (the front door's and this client's) over requests of 1 KiB and of
// 16 KiB, each sent in one write: a 16 KiB request, larger than the
// front door's own buffer, is read with as many calls as a 1 KiB one
// (readBig), not one more. The pause between requests lets the front
// door reach its wait for the next request first every time, so that
// its read that finds nothing happens once per request at both sizes
// (without it, how often it happens depends on the machine's speed).
func TestFrontBigRequestTakesOneRead(t *testing.T) {
	addr := serveAttack(t, sumHandler())
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a broken front door must not hang the test
	br := bufio.NewReader(c)
	const n = 150
	perRequest := func(size int) float64 {
		req := "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n" +
			strings.Repeat("x", size)
		send := func() {
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.HasPrefix(string(b), strconv.Itoa(size)+" ") {
				t.Fatalf("answer %q for %d bytes", b, size)
			}
		}
		send() // the connection learns the size of its requests
		before := readCalls(t)
		for range n {
			time.Sleep(time.Millisecond)
			send()
		}
		return float64(readCalls(t)-before) / n
	}
	small, big := perRequest(1024), perRequest(16384)
	t.Logf("read system calls per request, client's included: 1 KiB %.2f, 16 KiB %.2f", small, big)
	// Without readBig this handler's reads of a 16 KiB body (io.ReadAll's
	// growing buffer) cost about three more calls per request; the bound
	// leaves room for the noise of a slow run (the race detector's: up to
	// half a call).
	if big-small >= 1 {
		t.Fatalf("read system calls per request: 1 KiB %.2f, 16 KiB %.2f: want no more for 16 KiB", small, big)
	}
}
