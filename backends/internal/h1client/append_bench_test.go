package h1client

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkAppendRequest is the HTTP/1.1 fast path's serialization of a
// 16 KiB request into a reused buffer.
func BenchmarkAppendRequest(b *testing.B) {
	body := []byte(strings.Repeat("x", 16<<10))
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:9/v1/chat/completions", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header = http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r-1"}}
	req.ContentLength = int64(len(body))
	rd := new(bytes.Reader)
	req.Body = io.NopCloser(rd)
	buf := make([]byte, 0, 32<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		if buf, err = appendRequest(buf[:0], req); err != nil {
			b.Fatal(err)
		}
	}
}
