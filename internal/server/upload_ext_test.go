package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/internal/server"
)

// form writes a multipart form of fields (in order) and then, unless
// fileSize is negative, a file part of fileSize zero bytes, to w.
func form(w io.WriteCloser, mw *multipart.Writer, fields [][2]string, fileSize int64) error {
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return err
		}
	}
	if fileSize >= 0 {
		fw, err := mw.CreateFormFile("file", "audio.bin")
		if err != nil {
			return err
		}
		chunk := make([]byte, 1<<20)
		for left := fileSize; left > 0; left -= int64(len(chunk)) {
			if _, err := fw.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
				return err
			}
		}
	}
	if err := mw.Close(); err != nil {
		return err
	}
	return w.Close()
}

// upload sends a form through an io.Pipe (chunked, of unknown length).
func upload(t *testing.T, url string, fields [][2]string, fileSize int64, hdr map[string]string) (int, []byte) {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { pw.CloseWithError(form(pw, mw, fields, fileSize)) }()
	req, _ := http.NewRequest("POST", url, pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	_ = pr.CloseWithError(io.ErrClosedPipe) // the writer stops if the router refused early
	return resp.StatusCode, raw
}

// TestUploadStreamsThrough: a 256 MiB transcription upload reaches a
// replica whole (its duration is the file's size at 16,000 bytes a
// second) while the process — client, router and replica — allocates a
// small fraction of it: nobody holds the upload.
func TestUploadStreamsThrough(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	const size = 256 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	status, raw := upload(t, base+"/v1/audio/transcriptions", [][2]string{{"model", simModel}, {"response_format", "json"}}, size, nil)
	runtime.ReadMemStats(&after)
	var out struct {
		Text  string `json:"text"`
		Usage struct {
			Seconds int `json:"seconds"`
		} `json:"usage"`
	}
	if status != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.Usage.Seconds != (size+15999)/16000 {
		t.Fatalf("status %d, body %.300s; want %d seconds", status, raw, (size+15999)/16000)
	}
	d := after.TotalAlloc - before.TotalAlloc
	if d > 32<<20 {
		t.Errorf("a %d MiB upload allocated %d MiB in the process", size>>20, d>>20)
	}
	t.Logf("a %d MiB upload allocated %d KiB in the process (client, router and replica)", size>>20, d>>10)
	status, raw = upload(t, base+"/v1/audio/translations", [][2]string{{"model", simModel}}, 64000, nil)
	if status != http.StatusOK || !bytes.Contains(raw, []byte(`"text"`)) {
		t.Errorf("translation: status %d: %s", status, raw)
	}
}

// TestUploadRefusals: what the router refuses of an upload, before any
// replica is chosen.
func TestUploadRefusals(t *testing.T) {
	urls, seen := countingFleet(t, 2)
	srv, err := server.New(server.Config{Backends: urls, MaxUploadBytes: 1 << 20}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := serveFor(t, srv)
	url := base + "/v1/audio/transcriptions"
	cases := []struct {
		name     string
		status   int
		contains string
		send     func() (int, []byte)
	}{
		{"file before model", 400, "send model first", func() (int, []byte) { return upload(t, url, nil, 1000, nil) }},
		{"no model", 400, "no model field", func() (int, []byte) { return upload(t, url, [][2]string{{"language", "en"}}, -1, nil) }},
		{"unknown model", 404, "model_not_found", func() (int, []byte) { return upload(t, url, [][2]string{{"model", "nope"}}, 1000, nil) }},
		{"compressed", 415, "uncompressed", func() (int, []byte) {
			return upload(t, url, [][2]string{{"model", simModel}}, 1000, map[string]string{"Content-Encoding": "gzip"})
		}},
		{"not a form", 415, "multipart/form-data", func() (int, []byte) {
			s, _, raw := call(t, "POST", url, "application/json", []byte(`{}`), nil)
			return s, raw
		}},
		{"declared too large", 413, "max_upload_bytes", func() (int, []byte) {
			var b bytes.Buffer
			mw := multipart.NewWriter(&b)
			_ = mw.WriteField("model", simModel)
			fw, _ := mw.CreateFormFile("file", "a.wav")
			_, _ = fw.Write(make([]byte, 2<<20))
			_ = mw.Close()
			s, _, raw := call(t, "POST", url, mw.FormDataContentType(), b.Bytes(), nil)
			return s, raw
		}},
	}
	for _, c := range cases {
		status, raw := c.send()
		if status != c.status || !strings.Contains(string(raw), c.contains) {
			t.Errorf("%s: status %d (want %d), body %s (want %q)", c.name, status, c.status, raw, c.contains)
		}
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("the replicas saw %d refused uploads", n)
	}
	// Past the limit while streaming: the client learns 413 (the replica
	// got the beginning, which it cannot use).
	// It says nothing of the replica, which stays in the candidate set.
	for range 3 {
		status, raw := upload(t, url, [][2]string{{"model", simModel}}, 2<<20, nil)
		if status != http.StatusRequestEntityTooLarge {
			t.Errorf("streamed past the limit: status %d: %s", status, raw)
		}
	}
	_, _, raw := call(t, "GET", base+"/metrics", "", nil, nil)
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "prefixgate_backend_healthy{") && strings.HasSuffix(line, " 0") {
			t.Errorf("an upload past the limit ejected a replica: %s", line)
		}
	}
}

// TestBrokenUploadSaysNothingOfTheReplica: an upload whose chunked
// framing breaks in the middle fails its own request (400); the replica it
// was being streamed to stays in the candidate set.
func TestBrokenUploadSaysNothingOfTheReplica(t *testing.T) {
	urls, _ := countingFleet(t, 1)
	srv, err := server.New(server.Config{Backends: urls}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := serveFor(t, srv)
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("model", simModel)
	fw, _ := mw.CreateFormFile("file", "a.wav")
	_, _ = fw.Write(make([]byte, 64<<10))
	for range 4 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", mw.FormDataContentType(), b.Len())
		_, _ = conn.Write(b.Bytes())
		_, _ = io.WriteString(conn, "\r\nnot-a-chunk-size\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("broken upload: status %d", resp.StatusCode)
		}
		conn.Close()
	}
	_, _, raw := call(t, "GET", base+"/metrics", "", nil, nil)
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "prefixgate_backend_healthy{") && strings.HasSuffix(line, " 0") {
			t.Errorf("a broken upload ejected the replica: %s", line)
		}
	}
}
