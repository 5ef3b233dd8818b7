package h1front_test

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// sumHandler answers with the length and digest of the body it read.
func sumHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %x", len(b), sha256.Sum256(b))
	})
}

// TestFrontBigRequestsPipelined: requests larger than the front door's own
// read buffer, alone and pipelined, mixed with small ones, with more
// unread bytes after a request than the buffer holds: every body arrives
// whole and every answer in order, whichever buffer the bytes were read
// into.
func TestFrontBigRequestsPipelined(t *testing.T) {
	addr := serveAttack(t, sumHandler())
	sizes := []int{20000, 16384, 30, 70000, 9000, 0, 40000, 40000, 5, 8100, 100000, 1}
	var raw strings.Builder
	var want []string
	for i, n := range sizes {
		body := strings.Repeat(string(rune('a'+i%26)), n)
		raw.WriteString("POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: " + strconv.Itoa(n) + "\r\n")
		if i == len(sizes)-1 {
			raw.WriteString("Connection: close\r\n")
		}
		raw.WriteString("\r\n" + body)
		want = append(want, fmt.Sprintf("%d %x", n, sha256.Sum256([]byte(body))))
	}
	// All at once (one connection), then one request per connection write
	// on a second run, so that each read starts at a request's head.
	got := readAnswers(t, rawAnswers(t, addr, raw.String()))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("pipelined answers\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
