package main

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestServeLimitErrorsNameFlagKeyAndVariable runs the router as a process
// with small limits: each refusal names the flag, the file key and the
// variable that raise the limit.
func TestServeLimitErrorsNameFlagKeyAndVariable(t *testing.T) {
	fleet := startFleet(t, 1)
	addr := freeAddr(t)
	cmd := exec.Command(binary(t), "serve", "--listen", addr, "--backend", fleet.URLs()[0],
		"--max-body-bytes", "4096", "--max-string-bytes", "64", "--max-depth", "8", "--log-level", "warn")
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	base := "http://" + addr
	waitFor(t, "router listening", func() bool { _, _, err := chat(base, "hello?"); return err == nil })
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"body", `{"prompt":"` + strings.Repeat("a", 5000) + `"}`, 413, "raise it with --max-body-bytes, limits.max_body_bytes, PREFIXGATE_MAX_BODY_BYTES"},
		{"string", `{"prompt":"` + strings.Repeat("a", 100) + `"}`, 400, "raise it with --max-string-bytes, limits.max_string_bytes, PREFIXGATE_MAX_STRING_BYTES"},
		{"depth", strings.Repeat("[", 20) + strings.Repeat("]", 20), 400, "raise it with --max-depth, limits.max_depth, PREFIXGATE_MAX_DEPTH"},
	} {
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %s; want %d saying %q", tc.name, resp.StatusCode, body, tc.status, tc.want)
		}
	}
}
