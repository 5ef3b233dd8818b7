// Command overhead measures what prefixgate adds to a request on loopback,
// next to calling the backend directly and next to HAProxy doing
// consistent hashing on the body's first bytes with bounded loads.
//
//	go run ./internal/overhead [--sizes 1024,16384] [--concurrency 16] [--json]
//
// It builds the prefixgate binary, starts three stub OpenAI-compatible
// backends (one child process, three listeners, a fixed completion at
// once), `prefixgate serve` in front of them and, when haproxy is on PATH,
// `haproxy -f` with a generated configuration, all as real processes on
// free loopback ports. A closed-loop load generator then measures each
// target at each body size twice: latency with one request in flight, and
// throughput (and latency under load) with --concurrency workers. It
// prints a table (or JSON) and stops every process it started, by pid.
//
// It installs nothing: install-haproxy.sh next to this file installs the
// Debian package when a person wants the HAProxy row. It is a manual
// benchmark and not part of `make test`.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prefixgate/prefixgate/internal/testport"
)

type options struct {
	sizes        []int
	concurrency  int
	latencyConc  int
	requests     int
	latencyReqs  int
	warmup       int
	rounds       int
	distinct     int
	bin          string
	build        bool
	haproxy      string
	hashBytes    int
	threads      int
	jsonOut      bool
	cpuprofile   string
	profileSize  int
	profileSecs  int
	keep         bool
	stubReplicas int
	pgEnv        stringList
	pgArgs       stringList
	baselineBin  string
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	// The driver re-executes itself to serve the stub backends.
	if len(os.Args) == 3 && os.Args[1] == "-stubs" {
		n, _ := strconv.Atoi(os.Args[2])
		os.Exit(runStubs(n))
	}
	var o options
	var sizes string
	fs := flag.NewFlagSet("overhead", flag.ExitOnError)
	fs.StringVar(&sizes, "sizes", "1024,16384", "chat request body sizes in bytes, comma-separated")
	fs.IntVar(&o.concurrency, "concurrency", 16, "closed-loop workers in the throughput phase")
	fs.IntVar(&o.latencyConc, "latency-concurrency", 1, "closed-loop workers in the latency phase")
	fs.IntVar(&o.requests, "requests", 20000, "recorded requests per target and size in the throughput phase")
	fs.IntVar(&o.latencyReqs, "latency-requests", 10000, "recorded requests per target and size in the latency phase")
	fs.IntVar(&o.warmup, "warmup", 2000, "requests sent before each phase's clock starts")
	fs.IntVar(&o.rounds, "rounds", 1, "repeat every measurement this many times, interleaving the targets; results are pooled")
	fs.IntVar(&o.distinct, "bodies", 64, "distinct request bodies per size (sent in turn)")
	fs.StringVar(&o.bin, "bin", ".bin/prefixgate", "prefixgate binary, relative to the module root unless absolute")
	fs.BoolVar(&o.build, "build", true, "go build the prefixgate binary first")
	fs.StringVar(&o.haproxy, "haproxy", "haproxy", "haproxy executable; the row is skipped if it is not found (\"\" skips it)")
	fs.IntVar(&o.hashBytes, "hash-bytes", 4096, "HAProxy hashes this many leading body bytes")
	fs.IntVar(&o.threads, "haproxy-threads", runtime.NumCPU(), "HAProxy nbthread")
	fs.BoolVar(&o.jsonOut, "json", false, "print JSON instead of a table")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "after the table, profile prefixgate under load and write the CPU profile here")
	fs.IntVar(&o.profileSize, "profile-size", 16384, "body size for --cpuprofile")
	fs.IntVar(&o.profileSecs, "profile-seconds", 10, "profile length for --cpuprofile")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (logs, HAProxy config)")
	fs.IntVar(&o.stubReplicas, "replicas", 3, "stub backend replicas (1..10)")
	fs.Var(&o.pgEnv, "pg-env", "KEY=VALUE added to prefixgate's environment (repeatable; e.g. GOGC=400)")
	fs.StringVar(&o.baselineBin, "baseline-bin", "", "a second prefixgate binary (an earlier build), measured in the same run as the row \"baseline\"; not built")
	fs.Var(&o.pgArgs, "pg-arg", "extra argument to `prefixgate serve` (repeatable; e.g. --pg-arg=--config=FILE)")
	fs.Parse(os.Args[1:])
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 256 || n > 8<<20 {
			fmt.Fprintf(os.Stderr, "overhead: bad size %q (256..8388608)\n", s)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.concurrency < 1 || o.latencyConc < 1 || o.requests < 1 || o.latencyReqs < 1 || o.rounds < 1 ||
		o.distinct < 1 || o.stubReplicas < 1 || o.stubReplicas > 10 || o.warmup < 0 {
		fmt.Fprintln(os.Stderr, "overhead: counts must be positive (replicas 1..10)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, o)
	stop()
	os.Exit(code)
}

// procs are the processes this run started; stopAll ends each by its pid.
type procs struct{ list []*proc }

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (ps *procs) start(name string, cmd *exec.Cmd) (*proc, error) {
	// Own process group (a terminal's ^C reaches only the driver, which
	// stops its children itself); SIGTERM to the child if the driver dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	ps.list = append(ps.list, p)
	return p, nil
}

// stopAll sends SIGTERM to each started process by pid, then SIGKILL to any
// still running after 5 s, newest first.
func (ps *procs) stopAll() {
	for i := len(ps.list) - 1; i >= 0; i-- {
		p := ps.list[i]
		select {
		case <-p.done:
			continue
		default:
		}
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
}

// alive reports an error if p has exited.
func (p *proc) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v", p.name, p.cmd.ProcessState)
	default:
		return nil
	}
}

func run(ctx context.Context, o options) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		return 1
	}
	bin, err := buildBinary(ctx, o)
	if err != nil {
		return fail(err)
	}
	tmp, err := os.MkdirTemp("", "prefixgate-overhead-")
	if err != nil {
		return fail(err)
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "overhead: logs and configs in", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	st := &stack{ctx: ctx, o: o, tmp: tmp}
	defer st.stop()
	if err := st.startStubs(); err != nil {
		return fail(err)
	}
	if o.cpuprofile != "" {
		if st.adminAddr, err = freeAddr(); err != nil {
			return fail(err)
		}
	}
	if err := st.startServe("prefixgate", bin, st.adminAddr); err != nil {
		return fail(err)
	}
	// The baseline build, same flags, its own port and log.
	if o.baselineBin != "" {
		if err := st.startServe("baseline", o.baselineBin, ""); err != nil {
			return fail(err)
		}
	}
	if err := st.startHAProxy(); err != nil {
		return fail(err)
	}
	// The throughput phase's client keeps its connections for the profile.
	thrClient := newClient(o.concurrency)
	rep, err := measure(ctx, o, st.targets, st.haVersion, thrClient)
	if err != nil {
		return fail(err)
	}
	if o.jsonOut {
		writeJSON(os.Stdout, rep)
	} else {
		writeTable(os.Stdout, rep)
	}
	if o.cpuprofile != "" {
		if err := profile(ctx, o, st.adminAddr, st.targets[1], thrClient); err != nil {
			return fail(fmt.Errorf("profile: %w", err))
		}
		fmt.Fprintf(os.Stderr, "overhead: CPU profile of prefixgate (%d B bodies, %d workers, %d s) in %s\n",
			o.profileSize, o.concurrency, o.profileSecs, o.cpuprofile)
	}
	return 0
}

// buildBinary returns the prefixgate binary's path, building it first if
// asked.
func buildBinary(ctx context.Context, o options) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := o.bin
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(root, bin)
	}
	if o.build {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/prefixgate")
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("go build: %w", err)
		}
	}
	return bin, nil
}

// stack is what one run measures: the processes it started, in front of
// the stub backends, with their logs in tmp.
type stack struct {
	ctx       context.Context
	o         options
	tmp       string
	ps        procs
	closers   []io.Closer // logs and the stubs' standard input
	backends  []string    // the stubs' base URLs
	targets   []*target   // direct first, then prefixgate
	adminAddr string      // prefixgate's admin listener, for --cpuprofile
	haVersion string
}

// stop closes the logs and the stubs' input, then stops every process.
func (st *stack) stop() {
	for i := len(st.closers) - 1; i >= 0; i-- {
		st.closers[i].Close()
	}
	st.ps.stopAll()
}

// logFile creates name in the run's directory, closed by stop.
func (st *stack) logFile(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(st.tmp, name))
	if err == nil {
		st.closers = append(st.closers, f)
	}
	return f, err
}

// startStubs starts the stub backends (this program again, in its own
// process) and the "direct" target that calls them round-robin.
func (st *stack) startStubs() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	stubCmd := exec.Command(self, "-stubs", strconv.Itoa(st.o.stubReplicas))
	stubIn, _ := stubCmd.StdinPipe() // closed at exit: the stubs stop with the driver
	st.closers = append(st.closers, stubIn)
	stubOut, _ := stubCmd.StdoutPipe()
	stubCmd.Stderr = os.Stderr
	stubs, err := st.ps.start("stub backends", stubCmd)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(stubOut)
	for len(st.backends) < st.o.stubReplicas && sc.Scan() {
		st.backends = append(st.backends, strings.TrimSpace(sc.Text()))
	}
	if len(st.backends) < st.o.stubReplicas {
		return fmt.Errorf("stub backends printed %d of %d URLs", len(st.backends), st.o.stubReplicas)
	}
	direct := &target{Name: "direct", proc: stubs}
	for _, b := range st.backends {
		direct.urls = append(direct.urls, b+"/v1/chat/completions")
	}
	st.targets = append(st.targets, direct)
	return nil
}

// startServe starts `bin serve` in front of the stubs as the target name,
// with an admin listener when adminAddr is set, and waits until it lists
// the stubs' model.
func (st *stack) startServe(name, bin, adminAddr string) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	args := []string{"serve", "--listen", addr}
	for _, b := range st.backends {
		args = append(args, "--backend", b)
	}
	args = append(args, st.o.pgArgs...)
	if adminAddr != "" {
		args = append(args, "--admin-listen", adminAddr)
	}
	log, err := st.logFile(name + ".log")
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), st.o.pgEnv...)
	p, err := st.ps.start(name, cmd)
	if err != nil {
		return err
	}
	url := "http://" + addr
	if err := waitFor(st.ctx, p, func() error { return getContains(url+"/v1/models", `"`+stubModel+`"`) }); err != nil {
		return fmt.Errorf("%s not ready: %w (log: %s)", name, err, tail(log.Name()))
	}
	st.targets = append(st.targets, &target{Name: name, urls: []string{url + "/v1/chat/completions"}, proc: p})
	return nil
}

// startHAProxy starts HAProxy in front of the stubs, if it is installed.
func (st *stack) startHAProxy() error {
	if st.o.haproxy == "" {
		return nil
	}
	path, err := exec.LookPath(st.o.haproxy)
	if err != nil {
		fmt.Fprintf(os.Stderr, "overhead: %s not found, no HAProxy row (internal/overhead/install-haproxy.sh installs it)\n", st.o.haproxy)
		return nil
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	cfg, err := haproxyConfig(addr, st.backends, st.o.hashBytes, st.o.threads)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(st.tmp, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	if v, err := exec.Command(path, "-v").Output(); err == nil {
		st.haVersion = strings.TrimSpace(strings.SplitN(string(v), "\n", 2)[0])
	}
	log, err := st.logFile("haproxy.log")
	if err != nil {
		return err
	}
	cmd := exec.Command(path, "-db", "-f", cfgPath)
	cmd.Stdout, cmd.Stderr = log, log
	ha, err := st.ps.start("haproxy", cmd)
	if err != nil {
		return err
	}
	url := "http://" + addr + "/v1/chat/completions"
	probe := chatBodies(1024, 1)[0]
	if err := waitFor(st.ctx, ha, func() error { return postOK(url, probe) }); err != nil {
		return fmt.Errorf("haproxy not ready: %w (log: %s)", err, tail(log.Name()))
	}
	st.targets = append(st.targets, &target{Name: "haproxy", urls: []string{url}, proc: ha})
	return nil
}

// measure runs the latency and throughput phases on every target at every
// size, the targets interleaved in each round, and reports them with each
// proxy's latency over direct's.
func measure(ctx context.Context, o options, targets []*target, haVersion string, thrClient *http.Client) (report, error) {
	rep := report{
		Machine: machineInfo(haVersion),
		Config: reportConfig{Sizes: o.sizes, Concurrency: o.concurrency, LatencyConcurrency: o.latencyConc,
			Requests: o.requests, LatencyRequests: o.latencyReqs, Warmup: o.warmup, Rounds: o.rounds,
			Bodies: o.distinct, Replicas: o.stubReplicas, HashBytes: o.hashBytes, HAProxyThreads: o.threads},
	}
	latClient := newClient(o.latencyConc)
	for _, size := range o.sizes {
		bodies := chatBodies(size, o.distinct)
		cells := make([]*cell, len(targets))
		for i, t := range targets {
			cells[i] = &cell{Target: t.Name, Size: size}
		}
		for round := 0; round < o.rounds; round++ {
			for i, t := range targets {
				if err := measureCell(ctx, o, t, size, round, bodies, latClient, thrClient, cells[i]); err != nil {
					return rep, err
				}
			}
		}
		for _, c := range cells {
			c.finish()
		}
		for _, c := range cells[1:] {
			c.AddedP50us = c.P50us - cells[0].P50us
			c.AddedP99us = c.P99us - cells[0].P99us
			c.AddedLoadedP50us = c.LoadedP50us - cells[0].LoadedP50us
		}
		rep.Rows = append(rep.Rows, cells...)
	}
	rep.Machine.LoadAfter = loadAvg()
	return rep, nil
}

// measureCell runs one round of both phases on one target at one size and
// adds them, with the target's CPU time under load, to c.
func measureCell(ctx context.Context, o options, t *target, size, round int, bodies [][]byte, latClient, thrClient *http.Client, c *cell) error {
	if err := t.proc.alive(); err != nil {
		return err
	}
	if !o.jsonOut {
		fmt.Fprintf(os.Stderr, "overhead: %d B, %s, round %d\n", size, t.Name, round+1)
	}
	lr, err := runPhase(ctx, latClient, t.urls, bodies,
		phase{Concurrency: o.latencyConc, Warmup: o.warmup, Requests: o.latencyReqs}, o.stubReplicas)
	if err != nil {
		return fmt.Errorf("%s, %d B, latency phase: %w", t.Name, size, err)
	}
	cpu0 := procCPU(t.proc.cmd.Process.Pid)
	tr, err := runPhase(ctx, thrClient, t.urls, bodies,
		phase{Concurrency: o.concurrency, Warmup: o.warmup, Requests: o.requests}, o.stubReplicas)
	if err != nil {
		return fmt.Errorf("%s, %d B, throughput phase: %w", t.Name, size, err)
	}
	c.add(lr, tr, procCPU(t.proc.cmd.Process.Pid)-cpu0)
	return nil
}

type target struct {
	Name string
	urls []string
	proc *proc
}

// profile fetches prefixgate's CPU profile while keeping it under the
// throughput phase's load.
func profile(ctx context.Context, o options, adminAddr string, pg *target, client *http.Client) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", adminAddr, o.profileSecs))
		if err != nil {
			errc <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(o.cpuprofile)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		cancel()
		errc <- err
	}()
	bodies := chatBodies(o.profileSize, o.distinct)
	_, err := runPhase(ctx, client, pg.urls, bodies, phase{Concurrency: o.concurrency, Requests: 1 << 30}, o.stubReplicas)
	perr := <-errc
	if perr != nil {
		return perr
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// moduleRoot is the nearest directory up from here holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run from the repository")
		}
		dir = parent
	}
}

func freeAddr() (string, error) { return testport.Addr() }

// waitFor retries check for up to 30 s while p runs.
func waitFor(ctx context.Context, p *proc, check func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if aerr := p.alive(); aerr != nil {
			return aerr
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var probeClient = &http.Client{Timeout: 2 * time.Second}

func getContains(url, want string) error {
	resp, err := probeClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(want)) {
		return fmt.Errorf("GET %s: %d %.200s", url, resp.StatusCode, b)
	}
	return nil
}

func postOK(url string, body []byte) error {
	resp, err := probeClient.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %.200s", url, resp.StatusCode, b)
	}
	return nil
}

// tail is the end of a log file, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// procCPU is a process's user plus system CPU time so far, all threads,
// from /proc (0 where /proc is unavailable).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesized command name; utime and stime are the
	// 14th and 15th fields overall.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(u+st) * time.Second / clkTck
}
