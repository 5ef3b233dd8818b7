package backends_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends"
)

// The pool's HTTP/1.1 client against uvicorn, the server vLLM runs, as a
// real process: testdata/uvicorn_app.py, run by the Python of the test
// venv that PREFIXGATE_E2E_PYTHON names (`make test` points it at the
// venv it builds, whose dev extra pins uvicorn).

// uvicorn starts the app with the keep-alive timeout given and returns
// its base URL.
func uvicorn(t *testing.T, keepAlive string) string {
	t.Helper()
	py := os.Getenv("PREFIXGATE_E2E_PYTHON")
	required := os.Getenv("PREFIXGATE_REQUIRE_TOOLS") != ""
	if py == "" {
		if required {
			t.Fatal("PREFIXGATE_E2E_PYTHON is not set: the Makefile should point it at the Python test venv")
		}
		t.Skip("no uvicorn: set PREFIXGATE_E2E_PYTHON to the python of a venv with uvicorn (make test builds one)")
	}
	if err := exec.Command(py, "-c", "import uvicorn").Run(); err != nil {
		if required {
			t.Fatalf("%s cannot import uvicorn: %v", py, err)
		}
		t.Skipf("%s cannot import uvicorn: %v", py, err)
	}
	cmd := exec.Command(py, "testdata/uvicorn_app.py", keepAlive)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	port, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("uvicorn app printed no port: %v", err)
	}
	url := "http://127.0.0.1:" + strings.TrimSpace(port)
	// The port is bound before uvicorn serves it: wait for the first answer.
	for range 200 {
		resp, err := http.Get(url + "/runs")
		if err == nil {
			resp.Body.Close()
			return url
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("uvicorn at %s never answered", url)
	return ""
}

func uvicornPool(t *testing.T, url string) (*backends.Pool, *backends.Backend) {
	t.Helper()
	p, err := backends.NewPool([]string{url}, backends.Options{FirstByteTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p, p.Backends()[0]
}

func forward(p *backends.Pool, b *backends.Backend, path string) (string, error) {
	resp, err := p.Forward(context.Background(), b, http.MethodPost, path, []byte(`{"x":1}`), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return string(got), err
}

func runs(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return string(got)
}

// TestUvicornLargeResponseHeader: an answer with a 2 MB header is read,
// as net/http's Transport reads it, not taken for a failing backend.
func TestUvicornLargeResponseHeader(t *testing.T) {
	url := uvicorn(t, "5")
	p, b := uvicornPool(t, url)
	if got, err := forward(p, b, "/big-header"); err != nil || got != "ok" {
		t.Fatalf("answer %q, %v", got, err)
	}
}

// TestUvicornRequestDroppedUnansweredRunsOnce: uvicorn reads a request on
// a reused connection, runs it and closes the connection without an
// answer. The request fails, and is not sent again: the engine ran it
// once.
func TestUvicornRequestDroppedUnansweredRunsOnce(t *testing.T) {
	url := uvicorn(t, "5")
	p, b := uvicornPool(t, url)
	if got, err := forward(p, b, "/run"); err != nil || got != "ok" {
		t.Fatalf("first request: %q, %v", got, err)
	}
	if _, err := forward(p, b, "/run-and-drop"); err == nil {
		t.Fatal("a request closed without an answer succeeded")
	}
	if n := runs(t, url); n != "2" {
		t.Fatalf("the app ran %s requests, want 2: the dropped one was sent again", n)
	}
}

// TestUvicornIdleCloseIsNoticed: uvicorn closes a keep-alive connection
// idle past its timeout. The next request finds it closed before writing
// and goes on a new connection: every request is answered, each run once.
func TestUvicornIdleCloseIsNoticed(t *testing.T) {
	url := uvicorn(t, "0.05")
	p, b := uvicornPool(t, url)
	for i := range 5 {
		if got, err := forward(p, b, "/run"); err != nil || got != "ok" {
			t.Fatalf("request %d: %q, %v", i, got, err)
		}
		time.Sleep(200 * time.Millisecond) // past uvicorn's keep-alive timeout
	}
	if n := runs(t, url); n != "5" {
		t.Fatalf("the app ran %s requests, want 5", n)
	}
}
