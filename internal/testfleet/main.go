// Command testfleet runs a command against a live prefixgate: it starts the
// given prefixgate binary twice as real processes — `vllmsim` with a few
// simulated replicas and `serve` in front of them, on free loopback ports —
// waits until both answer, runs the command with PREFIXGATE_URL set to the
// router and PREFIXGATE_BACKENDS to the replicas, then stops both processes
// and exits with the command's status.
//
// The README's test command uses it so that the Go, Python and TypeScript
// SDK suites call a real server.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", ".bin/prefixgate", "prefixgate binary to start")
	replicas := flag.Int("replicas", 3, "simulated replicas")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "Usage: testfleet [--bin PATH] [--replicas K] -- COMMAND [ARGS...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(*bin, *replicas, flag.Args()))
}

func run(bin string, replicas int, command []string) int {
	simPort, err := freePortRange(replicas)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testfleet:", err)
		return 1
	}
	sim := exec.Command(bin, "vllmsim", "--listen", "127.0.0.1:"+strconv.Itoa(simPort),
		"--replicas", strconv.Itoa(replicas), "--preset", "tiny", "--speed", "20")
	sim.Stderr = os.Stderr
	simOut, err := sim.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testfleet:", err)
		return 1
	}
	if err := sim.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testfleet: start vllmsim:", err)
		return 1
	}
	defer stop(sim)
	var backends []string
	sc := bufio.NewScanner(simOut)
	for len(backends) < replicas && sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "http://") {
			backends = append(backends, line)
		}
	}
	if len(backends) < replicas {
		fmt.Fprintf(os.Stderr, "testfleet: vllmsim printed %d of %d replica URLs\n", len(backends), replicas)
		return 1
	}
	go func() {
		for sc.Scan() {
		}
	}()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testfleet:", err)
		return 1
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"serve", "--listen", addr}
	for _, b := range backends {
		args = append(args, "--backend", b)
	}
	srv := exec.Command(bin, args...)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testfleet: start serve:", err)
		return 1
	}
	defer stop(srv)
	url := "http://" + addr
	if err := waitReady(url+"/readyz", 30*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "testfleet: router not ready:", err)
		return 1
	}

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "PREFIXGATE_URL="+url, "PREFIXGATE_BACKENDS="+strings.Join(backends, ","))
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "testfleet:", err)
		return 1
	}
	return 0
}

// stop ends a process this harness started: SIGTERM, then SIGKILL after 10s.
func stop(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}

// freePortRange finds k consecutive free loopback ports.
func freePortRange(k int) (int, error) {
	for attempt := 0; attempt < 50; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		base := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		ok := true
		for i := 0; i < k && ok; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok && base+k-1 <= 65535 {
			return base, nil
		}
	}
	return 0, errors.New("no range of free loopback ports found")
}

func waitReady(url string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer 200 within %s (last error: %v)", url, limit, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
