package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/internal/testport"
)

// These tests run the built binary as a real process: `prefixgate serve`
// in front of simulated replicas, driven by signals as an operator would.

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// binary builds prefixgate once per test run.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts the binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "prefixgate-e2e")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "prefixgate")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := testport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startServe starts `prefixgate serve` with args and waits until it is
// ready. The process is killed at cleanup if the test has not ended it.
func startServe(t *testing.T, args ...string) (*exec.Cmd, string, *lockedBuffer) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(binary(t), append([]string{"serve", "--listen", addr}, args...)...)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	base := "http://" + addr
	waitFor(t, "router ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return cmd, base, logs
}

// lockedBuffer collects a process's stderr while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond every 20ms for up to 20s; it bounds the wait, it does
// not assert a speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func chat(base, question string) (backend string, status int, err error) {
	body := `{"model":"vllmsim/tiny","messages":[{"role":"system","content":"shared context"},{"role":"user","content":"` + question + `"}],"max_tokens":2}`
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "", resp.StatusCode, err
	}
	return resp.Header.Get(server.BackendHeader), resp.StatusCode, nil
}

func startFleet(t *testing.T, k int) *vllmsim.Fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", k, vllmsim.Config{Preset: "tiny", Speed: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); fleet.Close() })
	return fleet
}

func hostport(u string) string { return strings.TrimPrefix(u, "http://") }

func TestServeReloadsOnSIGHUPAndFileChangeAndDrainsOnSIGTERM(t *testing.T) {
	fleet := startFleet(t, 2)
	a, b := fleet.URLs()[0], fleet.URLs()[1]
	cfg := filepath.Join(t.TempDir(), "prefixgate.yaml")
	write := func(backend string) {
		if err := os.WriteFile(cfg, []byte("backends: ["+backend+"]\nrouting:\n  policy: prefix-aware\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(a)
	cmd, base, logs := startServe(t, "--config", cfg, "--config-poll", "50ms")
	defer func() {
		if t.Failed() {
			t.Logf("router log:\n%s", logs.String())
		}
	}()
	if got, status, err := chat(base, "q1"); err != nil || status != 200 || got != hostport(a) {
		t.Fatalf("before reload: backend %q status %d err %v; want %s", got, status, err, hostport(a))
	}

	// A bad file is rejected and the running configuration stays.
	if err := os.WriteFile(cfg, []byte("backends: [a]\nrouting:\n  polcy: random\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reload rejection logged", func() bool { return strings.Contains(logs.String(), "reload rejected") })
	if got, _, err := chat(base, "q2"); err != nil || got != hostport(a) {
		t.Fatalf("after a rejected reload: backend %q err %v; want %s", got, err, hostport(a))
	}

	write(b)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "requests to move to the new backend", func() bool {
		got, status, err := chat(base, "q3")
		return err == nil && status == 200 && got == hostport(b)
	})

	// Editing the file is enough: the watcher reloads it.
	write(a)
	waitFor(t, "requests to follow the edited file", func() bool {
		got, status, err := chat(base, "q4")
		return err == nil && status == 200 && got == hostport(a)
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, logs.String())
	}
}

func TestServeLosesNoRequestWhenABackendDies(t *testing.T) {
	fleet := startFleet(t, 3)
	var args []string
	for _, u := range fleet.URLs() {
		args = append(args, "--backend", u)
	}
	_, base, logs := startServe(t, args...)
	const workers, each = 6, 40
	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if w == 0 && i == each/4 {
					fleet.Replicas()[0].Crash()
				}
				_, status, err := chat(base, fmt.Sprintf("worker %d question %d", w, i))
				sent.Add(1)
				if err != nil || status != http.StatusOK {
					failed.Add(1)
					t.Logf("request failed: status %d err %v", status, err)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed after a backend died; want none (retry before the first byte)\n%s", failed.Load(), sent.Load(), logs.String())
	}
}
