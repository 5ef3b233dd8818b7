//go:build linux

package h1client

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"testing"
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

// TestH1AwaitSavesTheEmptyRead counts the process's read system calls
// over the same requests sent the ordinary way (a trace that asks to hear
// of the write forces it) and with writeAndAwait: the ordinary way reads
// once more per request, the read that finds the answer not there yet.
func TestH1AwaitSavesTheEmptyRead(t *testing.T) {
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
	const n = 400
	count := func(ctx context.Context) float64 {
		forwardBody(t, p, b, "/", []byte("warm"), nil) // the connection exists before counting
		before := readCalls(t)
		for range n {
			resp, err := p.Forward(ctx, b, http.MethodPost, "/", []byte(`{"x":1}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(resp.Body); err != nil || string(got) != "ok" {
				t.Fatalf("answer %q, %v", got, err)
			}
			resp.Body.Close()
		}
		return float64(readCalls(t)-before) / n
	}
	wrote := 0
	plain := count(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote++ },
	}))
	if wrote != n {
		t.Fatalf("the trace heard of %d writes, want %d", wrote, n)
	}
	awaited := count(context.Background())
	t.Logf("read system calls per request, backend's included: ordinary %.2f, awaited %.2f", plain, awaited)
	// About one fewer: the ordinary way's read finds nothing unless the
	// backend answered between the write and the read, which a loaded
	// machine's scheduling can make happen now and then, so the bound is
	// lower; with the await off the two are equal.
	if plain-awaited < 0.3 {
		t.Fatalf("read system calls per request: ordinary %.2f, awaited %.2f: want at least 0.3 fewer", plain, awaited)
	}
}
