package image_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/image"
	"github.com/prefixgate/prefixgate/internal/testport"
)

// runAs is the command `path args...` run from the image's filesystem:
// as root, chrooted into rootfs as the image's user with no supplementary
// groups; otherwise as this user, from rootfs.
func runAs(rootfs, path string, args ...string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/" + image.UserName}
	if os.Geteuid() == 0 {
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Chroot:     rootfs,
			Credential: &syscall.Credential{Uid: image.UID, Gid: image.GID, Groups: []uint32{}},
		}
		return cmd
	}
	cmd.Path = filepath.Join(rootfs, path)
	cmd.Dir = rootfs
	return cmd
}

// start starts `prefixgate args...` from the image; the process is killed
// at cleanup if the test has not stopped it.
func start(t *testing.T, rootfs string, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := runAs(rootfs, image.Entrypoint, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Args, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, stdout
}

// startVLLMSim starts one simulated replica from the image and returns
// its URL, the first line it prints.
func startVLLMSim(t *testing.T, rootfs string) (*exec.Cmd, string) {
	t.Helper()
	cmd, stdout := start(t, rootfs, "vllmsim", "--listen", "127.0.0.1:0", "--replicas", "1", "--preset", "tiny", "--speed", "50")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("vllmsim printed no URL: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return cmd, strings.TrimSpace(line)
}

// stop sends SIGTERM and waits for a clean exit.
func stop(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("%s after SIGTERM: %v", cmd.Args, err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := testport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitReady polls /readyz every 20 ms for up to 20 s: it bounds the wait,
// it does not assert a speed.
func waitReady(t *testing.T, base string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("%s/readyz did not answer 200", base)
}

// checkChat sends a chat request through serve and checks that the
// replica answered it.
func checkChat(t *testing.T, base, backend string) {
	t.Helper()
	body := `{"model":"vllmsim/tiny","messages":[{"role":"user","content":"hello from the image"}],"max_tokens":3}`
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("chat through serve: status %d, decode error %v", resp.StatusCode, err)
	}
	if len(answer.Choices) != 1 || answer.Choices[0].Message.Content == "" {
		t.Fatalf("chat through serve: %+v, want one choice with content", answer)
	}
	if got := resp.Header.Get("X-Prefixgate-Backend"); got != backend {
		t.Fatalf("answered by %q, want the replica %s", got, backend)
	}
}

// checkUID reads the process's real and effective uid from /proc.
func checkUID(t *testing.T, pid int) {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "Uid:" {
			if f[1] != strconv.Itoa(image.UID) || f[2] != strconv.Itoa(image.UID) {
				t.Errorf("process %d runs as uid %s (effective %s), want %d", pid, f[1], f[2], image.UID)
			}
			return
		}
	}
	t.Fatalf("/proc/%d/status has no Uid line", pid)
}
