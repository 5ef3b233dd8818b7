package kubedisco_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/testport"
)

// hostIP is a non-loopback IPv4 address of this machine: the API server
// refuses loopback endpoint addresses, and the replicas listen on it.
func hostIP(t *testing.T) string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address to list as an endpoint (the API server refuses loopback ones)")
	return ""
}

// replica is a vllmsim replica behind a real HTTP server that records the
// sequence number and arrival time of each generation request.
type replica struct {
	sim  *vllmsim.Replica
	srv  *http.Server
	port int32

	mu       sync.Mutex
	seqs     []int64
	firstAt  time.Time
	requests int
}

var seqRE = regexp.MustCompile(`\[seq (\d+)\]`)

func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost && strings.HasPrefix(req.URL.Path, "/v1/") {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		req.Body = io.NopCloser(bytes.NewReader(body))
		r.mu.Lock()
		if m := seqRE.FindSubmatch(body); m != nil {
			n, _ := strconv.ParseInt(string(m[1]), 10, 64)
			r.seqs = append(r.seqs, n)
		}
		if r.requests == 0 {
			r.firstAt = time.Now()
		}
		r.requests++
		r.mu.Unlock()
	}
	r.sim.ServeHTTP(w, req)
}

// maxSeq is the highest sequence number the replica has seen, and its
// request count.
func (r *replica) stats() (maxSeq int64, n int, first time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.seqs {
		maxSeq = max(maxSeq, s)
	}
	return maxSeq, r.requests, r.firstAt
}

// hits is the replica's prefix cache hits and queries, in tokens.
func (r *replica) hits() (hits, queries uint64) {
	st := r.sim.Stats()
	return st.PrefixCacheHits, st.PrefixCacheQueries
}

// startReplicas starts n replicas on ip, each on its own port.
func startReplicas(t *testing.T, ip string, n int, name string) []*replica {
	t.Helper()
	out := make([]*replica, n)
	for i := range out {
		sim, err := vllmsim.NewReplica(fmt.Sprintf("%s-%d", name, i), vllmsim.Config{Preset: "tiny", Speed: 20, DefaultMaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{sim: sim, port: int32(ln.Addr().(*net.TCPAddr).Port)}
		r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
		go r.srv.Serve(ln)
		t.Cleanup(func() {
			r.srv.Close()
			sim.Close()
		})
		out[i] = r
	}
	return out
}

// fleetHits is the prefix cache hit rate (percent of prompt tokens found)
// of rs between two snapshots of hits.
func fleetHits(rs []*replica) (hits, queries uint64) {
	for _, r := range rs {
		h, q := r.hits()
		hits, queries = hits+h, queries+q
	}
	return hits, queries
}

var buildOnce sync.Once
var builtBin, buildErr = "", error(nil)

// binary builds prefixgate once per test binary.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kubedisco-e2e")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "prefixgate")
		out, err := exec.Command("go", "build", "-o", builtBin, "../../cmd/prefixgate").CombinedOutput()
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

// router is a running `prefixgate serve`.
type router struct {
	base, admin string
	logs        *syncBuffer
}

// serve starts `prefixgate serve` with args and waits until it is ready;
// it is killed at the test's end.
func serve(t *testing.T, args ...string) *router {
	t.Helper()
	r := &router{base: "http://" + freeAddr(t), admin: "http://" + freeAddr(t)}
	r.logs = run(t, append([]string{"serve", "--listen", strings.TrimPrefix(r.base, "http://"),
		"--admin-listen", strings.TrimPrefix(r.admin, "http://"), "--log-level", "warn"}, args...), func() bool {
		resp, err := http.Get(r.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return r
}

// run starts the prefixgate binary with args and waits until ready says
// so; it is killed at the test's end, and its log shown if the test
// failed.
func run(t *testing.T, args []string, ready func() bool) *syncBuffer {
	t.Helper()
	logs := &syncBuffer{}
	cmd := exec.Command(binary(t), args...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prefixgate %s's log:\n%s", args[0], logs.String())
		}
	})
	until(t, "prefixgate "+args[0]+" ready", ready)
	return logs
}

// syncBuffer collects a process's stderr while the test may read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// backends is the set of backend addresses prefixgate's pool holds.
func (r *router) backends(t *testing.T) map[string]bool {
	t.Helper()
	resp, err := http.Get(r.admin + "/admin/backends")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Backends []struct{ Name string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, b := range body.Backends {
		out[b.Name] = true
	}
	return out
}

// until polls cond every 5ms for up to 30 s; it bounds the wait.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not after 30 s", what)
}

// load sends chat requests through the router from a few workers until
// stopped or max requests are sent. Most share one of a few long
// prefixes; the rest have their own.
type load struct {
	base     string
	seq      atomic.Int64
	max      int64
	done     atomic.Int64
	failed   atomic.Int64
	errMu    sync.Mutex
	errs     []string
	stop     chan struct{}
	haltOnce sync.Once
	wg       sync.WaitGroup
	client   *http.Client
	prefix   []string
	workers  int
}

func newLoad(base string, max int64) *load {
	l := &load{base: base, max: max, stop: make(chan struct{}), client: &http.Client{Timeout: time.Minute}, workers: 4}
	for g := range 12 {
		l.prefix = append(l.prefix, strings.Repeat(fmt.Sprintf("Group %d shares this long system prompt about topic %d. ", g, g*7), 40))
	}
	return l
}

func (l *load) start() {
	for range l.workers {
		l.wg.Go(l.work)
	}
}

func (l *load) work() {
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		n := l.seq.Add(1)
		if n > l.max {
			return
		}
		sys := l.prefix[n%int64(len(l.prefix))]
		if n%4 == 0 {
			sys = strings.Repeat(fmt.Sprintf("A prompt of its own, number %d. ", n), 40)
		}
		body := fmt.Sprintf(`{"model":"vllmsim/tiny","max_tokens":4,"messages":[{"role":"system","content":%q},{"role":"user","content":"question [seq %d]"}]}`, sys, n)
		resp, err := l.client.Post(l.base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("seq %d: %s", n, resp.Status)
			}
		}
		if err != nil {
			l.failed.Add(1)
			l.errMu.Lock()
			if len(l.errs) < 10 {
				l.errs = append(l.errs, err.Error())
			}
			l.errMu.Unlock()
		}
		l.done.Add(1)
	}
}

// waitDone waits until n more requests have been answered.
func (l *load) waitDone(t *testing.T, n int64) {
	t.Helper()
	target := l.done.Load() + n
	until(t, fmt.Sprintf("%d requests answered", n), func() bool { return l.done.Load() >= target })
}

// halt stops the workers and waits for their requests; a second call
// does nothing.
func (l *load) halt() {
	l.haltOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}
