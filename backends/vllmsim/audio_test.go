package vllmsim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// wavHeader is a 44-byte PCM WAV header for dataLen bytes of 16 kHz mono
// 16-bit audio (32,000 bytes a second).
func wavHeader(dataLen uint32) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.WriteString("RIFF")
	binary.Write(&b, le, uint32(36+dataLen))
	b.WriteString("WAVEfmt ")
	binary.Write(&b, le, []uint32{16})
	binary.Write(&b, le, []uint16{1, 1})
	binary.Write(&b, le, []uint32{16000, 32000})
	binary.Write(&b, le, []uint16{2, 16})
	b.WriteString("data")
	binary.Write(&b, le, dataLen)
	return b.Bytes()
}

// audioBody builds a multipart body with fields (in order) and a file part
// holding file.
func audioBody(t *testing.T, fields [][2]string, file []byte) (string, *bytes.Buffer) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		mw.WriteField(f[0], f[1])
	}
	if file != nil {
		fw, _ := mw.CreateFormFile("file", "a.wav")
		fw.Write(file)
	}
	mw.Close()
	return mw.FormDataContentType(), &b
}

func TestAudioRoutes(t *testing.T) {
	_, u := serve(t, fastConfig())
	oneSecond := append(wavHeader(32000), make([]byte, 32000)...)
	words := int(math.Ceil(wordsPerSecond))
	cases := []struct {
		path   string
		fields [][2]string
		file   []byte
		status int
		want   string // in the body
	}{
		{"/v1/audio/transcriptions", [][2]string{{"model", "sim-model"}}, oneSecond, 200,
			`{"text":"` + OutputText(0, words) + `","usage":{"seconds":1,"type":"duration"}}`},
		{"/v1/audio/translations", [][2]string{{"response_format", "text"}}, oneSecond, 200, OutputText(0, words) + "\n"},
		{"/v1/audio/transcriptions", [][2]string{{"response_format", "verbose_json"}, {"language", "de"}}, oneSecond, 200,
			`"duration":1,"language":"de","segments":[],"task":"transcribe"`},
		{"/v1/audio/transcriptions", nil, make([]byte, 4*compressedBytesPerSecond), 200, `"seconds":4`},
		{"/v1/audio/transcriptions", [][2]string{{"model", "sim-model"}}, nil, 400, "file: field required"},
		{"/v1/audio/transcriptions", [][2]string{{"response_format", "srt"}}, oneSecond, 400, "response_format"},
		{"/v1/audio/translations", [][2]string{{"model", "nope"}}, oneSecond, 404, "nope"},
	}
	for _, c := range cases {
		ct, body := audioBody(t, c.fields, c.file)
		resp, err := http.Post(u+c.path, ct, body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
			t.Errorf("%s %v: %d %s, want %d with %s", c.path, c.fields, resp.StatusCode, b, c.status, c.want)
		}
	}
	resp, b := post(t, u+"/v1/audio/transcriptions", `{"file":"x"}`)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "multipart/form-data") {
		t.Errorf("JSON body: %d %s", resp.StatusCode, b)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestAudioUploadIsStreamed sends a 64 MiB upload from a pipe, so neither
// side ever holds it, and checks that the replica read all of it while
// allocating a small fraction of its size.
func TestAudioUploadIsStreamed(t *testing.T) {
	_, u := serve(t, fastConfig())
	const dataLen = 64 << 20
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		mw.WriteField("model", "sim-model")
		mw.WriteField("response_format", "verbose_json")
		fw, _ := mw.CreateFormFile("file", "long.wav")
		fw.Write(wavHeader(dataLen))
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < dataLen; sent += len(chunk) {
			if _, err := fw.Write(chunk); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	body := &countingReader{r: pr}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, err := http.Post(u+"/v1/audio/transcriptions", mw.FormDataContentType(), body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v %v", resp.StatusCode, err, m)
	}
	runtime.ReadMemStats(&after)
	if body.n < dataLen {
		t.Fatalf("sent %d bytes, want at least %d", body.n, dataLen)
	}
	if want := float64(dataLen) / 32000; m["duration"] != want {
		t.Fatalf("duration %v, want %v: the header was not read", m["duration"], want)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("allocated %d MiB to pass %d MiB through", grew>>20, dataLen>>20)
	}
	t.Logf("passed %d MiB, allocated %.1f MiB", body.n>>20, float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
}
