package main

import (
	"bufio"
	"bytes"
	"context"
	bin "encoding/binary"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// uploadFileBytes is the size of the audio file of TestUploadGiBMemoryFlat.
const uploadFileBytes = 1 << 30

// TestUploadGiBMemoryFlat streams a 1 GiB multipart upload (a WAV file:
// its header, then zeros, made as it is sent) to /v1/audio/transcriptions
// through `prefixgate serve` to a `prefixgate vllmsim` replica, both real
// processes, and samples the router's resident memory before, during and
// after: it must grow by less than 64 MiB, and the answer must be a 200.
// The upload is bounded by a context deadline; how long it took is logged.
func TestUploadGiBMemoryFlat(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads resident memory from /proc")
	}
	_, replica := startReplica(t, "audio")
	// The form around a 1 GiB file is a little over 1 GiB, the default
	// limit.
	cmd, base, logs := startServe(t, "--backend", "http://"+replica, "--max-upload-bytes", strconv.Itoa(uploadFileBytes+1<<20))
	defer func() {
		if t.Failed() {
			t.Logf("router log:\n%s", logs.String())
		}
	}()
	pid := cmd.Process.Pid
	// A small upload first, so that the router's buffers and connections
	// exist before the baseline is read.
	if status, out := postAudio(t, context.Background(), base, 64<<10); status != http.StatusOK {
		t.Fatalf("small upload: status %d, body %s", status, out)
	}
	before := vmRSS(t, pid)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var mu sync.Mutex
	peak := before
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if rss, ok := readVmRSS(pid); ok {
				mu.Lock()
				peak = max(peak, rss)
				mu.Unlock()
			}
		}
	}()
	start := time.Now()
	status, out := postAudio(t, ctx, base, uploadFileBytes)
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	after := vmRSS(t, pid)
	peak = max(peak, after)
	if status != http.StatusOK {
		t.Fatalf("1 GiB upload: status %d, body %.500s", status, out)
	}
	if !bytes.Contains(out, []byte(`"text"`)) {
		t.Errorf("1 GiB upload: answer %.500s holds no transcript", out)
	}
	growth := peak - before
	t.Logf("1 GiB upload in %v (%.0f MiB/s); router RSS %d MiB before, %d MiB peak, %d MiB after: growth %d MiB",
		elapsed.Round(time.Millisecond), float64(uploadFileBytes)/(1<<20)/elapsed.Seconds(), before>>20, peak>>20, after>>20, growth>>20)
	if growth >= 64<<20 {
		t.Errorf("router RSS grew by %d MiB during a 1 GiB upload; want less than 64 MiB", growth>>20)
	}
}

// postAudio sends a transcription of a WAV file of size bytes, made on
// the fly through a pipe (the model field first, as the OpenAI SDKs send
// it), and returns the status and the answer.
func postAudio(t *testing.T, ctx context.Context, base string, size int64) (int, []byte) {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeAudioForm(mw, size))
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/audio/transcriptions", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		pr.CloseWithError(err)
		t.Fatalf("upload of %d bytes: %v", size, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("upload of %d bytes: reading the answer: %v", size, err)
	}
	return resp.StatusCode, out
}

// writeAudioForm writes the form: model, then a file of size bytes, a
// 16 kHz 16-bit mono WAV header and zeros.
func writeAudioForm(mw *multipart.Writer, size int64) error {
	if err := mw.WriteField("model", "vllmsim/tiny"); err != nil {
		return err
	}
	fw, err := mw.CreateFormFile("file", "big.wav")
	if err != nil {
		return err
	}
	le := bin.LittleEndian
	hdr := make([]byte, 44)
	copy(hdr, "RIFF")
	le.PutUint32(hdr[4:], uint32(size-8))
	copy(hdr[8:], "WAVEfmt ")
	le.PutUint32(hdr[16:], 16)
	le.PutUint16(hdr[20:], 1)     // PCM
	le.PutUint16(hdr[22:], 1)     // mono
	le.PutUint32(hdr[24:], 16000) // sample rate
	le.PutUint32(hdr[28:], 32000) // byte rate
	le.PutUint16(hdr[32:], 2)     // block align
	le.PutUint16(hdr[34:], 16)    // bits per sample
	copy(hdr[36:], "data")
	le.PutUint32(hdr[40:], uint32(size-44))
	if _, err := fw.Write(hdr); err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for left := size - 44; left > 0; {
		n, err := fw.Write(zeros[:min(left, int64(len(zeros)))])
		if err != nil {
			return err
		}
		left -= int64(n)
	}
	return mw.Close()
}

// vmRSS is process pid's resident memory in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	rss, ok := readVmRSS(pid)
	if !ok {
		t.Fatalf("no VmRSS in /proc/%d/status", pid)
	}
	return rss
}

func readVmRSS(pid int) (int64, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		return kb << 10, err == nil
	}
	return 0, false
}
