package server_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/server"
)

func TestBodyLimits(t *testing.T) {
	base := startRouter(t, 1, server.Config{Pipeline: pipeline.Config{MaxDecodedBytes: 1 << 20}})
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	zs := func(b []byte) []byte {
		enc, _ := zstd.NewWriter(nil)
		return enc.EncodeAll(b, nil)
	}
	chat := []byte(`{"model":"vllmsim/tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	bomb := append([]byte(`{"model":"vllmsim/tiny","prompt":"`), bytes.Repeat([]byte("a"), 8<<20)...)
	bomb = append(bomb, `"}`...)
	for _, tc := range []struct {
		name, encoding string
		body           []byte
		hdr            map[string]string
		status         int
		want           string
	}{
		{"gzip body", "gzip", gz(chat), nil, 200, ""},
		{"zstd body", "zstd", zs(chat), nil, 200, ""},
		{"gzip bomb", "gzip", gz(bomb), nil, 413, "compression bomb"},
		{"zstd bomb", "zstd", zs(bomb), nil, 413, "decoded-size limit"},
		{"corrupt gzip", "gzip", []byte("not gzip at all"), nil, 400, "gzip"},
		{"too deep", "", []byte(strings.Repeat("[", 200) + strings.Repeat("]", 200)), nil, 400, "depth"},
		{"huge header", "", chat, map[string]string{"X-Big": strings.Repeat("h", 200<<10)}, 431, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions", bytes.NewReader(tc.body))
			if tc.name == "gzip body" || tc.name == "zstd body" {
				req.URL.Path = "/v1/chat/completions"
			}
			if tc.encoding != "" {
				req.Header.Set("Content-Encoding", tc.encoding)
			}
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d; want %d (body %s)", resp.StatusCode, tc.status, body)
			}
			if tc.want != "" && !strings.Contains(strings.ToLower(string(body)), tc.want) {
				t.Errorf("body %s lacks %q", body, tc.want)
			}
		})
	}
}
