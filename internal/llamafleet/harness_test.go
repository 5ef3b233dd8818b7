package llamafleet

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/testport"
)

// Environment that `make test` sets after build.sh; see the package doc.
const (
	envServer = "LLAMAFLEET_SERVER"
	envPython = "LLAMAFLEET_PYTHON"
	envCache  = "LLAMAFLEET_CACHE"
)

//go:embed tinymodel.py
var tinyModelScript []byte

// modelArgs are tinymodel.py's arguments; they are part of the cache key.
var modelArgs = []string{"--layers", "4", "--embd", "256", "--ff", "768", "--heads", "4", "--ctx", "8192"}

// embedModelArgs make the embedding model: smaller, with mean pooling.
var embedModelArgs = []string{"--layers", "2", "--embd", "128", "--ff", "384", "--heads", "4", "--ctx", "2048", "--pooling", "mean"}

// modelName is the alias every replica serves the model under.
const modelName = "tiny"

// tools are the prepared parts every test uses.
type tools struct {
	server     string // llama-server
	python     string // venv python with gguf and openai
	prefixgate string // freshly built prefixgate binary
	model      string // tiny GGUF model
	embedModel string // tiny GGUF embedding model (embedModelArgs)
}

var (
	toolsOnce sync.Once
	toolsVal  tools
	toolsErr  error
	binDir    string // holds the prefixgate binary built for this run
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// setup skips when the fleet was not built (plain `go test`) and fails when
// it was announced but something is missing.
func setup(t *testing.T) tools {
	t.Helper()
	server, python := os.Getenv(envServer), os.Getenv(envPython)
	if server == "" && python == "" {
		t.Skipf("no llama.cpp fleet: %s and %s are unset; `make test` builds llama-server with internal/llamafleet/build.sh and sets them", envServer, envPython)
	}
	toolsOnce.Do(func() { toolsVal, toolsErr = prepare(server, python) })
	if toolsErr != nil {
		t.Fatal(toolsErr)
	}
	return toolsVal
}

func prepare(server, python string) (tools, error) {
	for name, p := range map[string]string{envServer: server, envPython: python} {
		if p == "" {
			return tools{}, fmt.Errorf("%s is unset while the other fleet variables are set", name)
		}
		st, err := os.Stat(p)
		if err != nil {
			return tools{}, fmt.Errorf("%s: %w", name, err)
		}
		if st.Mode()&0o111 == 0 {
			return tools{}, fmt.Errorf("%s: %s is not executable", name, p)
		}
	}
	cache := os.Getenv(envCache)
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return tools{}, fmt.Errorf("no cache directory for the model: %w", err)
		}
		cache = filepath.Join(dir, "prefixgate")
	}
	model, err := tinyModel(python, cache, modelArgs)
	if err != nil {
		return tools{}, err
	}
	embedModel, err := tinyModel(python, cache, embedModelArgs)
	if err != nil {
		return tools{}, err
	}
	binDir, err = os.MkdirTemp("", "llamafleet-bin-")
	if err != nil {
		return tools{}, err
	}
	bin := filepath.Join(binDir, "prefixgate")
	build := exec.Command("go", "build", "-o", bin, "github.com/prefixgate/prefixgate/cmd/prefixgate")
	if out, err := build.CombinedOutput(); err != nil {
		return tools{}, fmt.Errorf("build prefixgate: %w\n%s", err, out)
	}
	return tools{server: server, python: python, prefixgate: bin, model: model, embedModel: embedModel}, nil
}

// tinyModel returns the cached model for this script and these arguments,
// writing it first if absent. The name carries the hash of both, so a change
// to either makes a new file and never reuses a stale one.
func tinyModel(python, cache string, args []string) (string, error) {
	h := sha256.New()
	h.Write(tinyModelScript)
	h.Write([]byte(strings.Join(args, "\x00")))
	dir := filepath.Join(cache, "models")
	path := filepath.Join(dir, "tiny-llama-"+hex.EncodeToString(h.Sum(nil))[:16]+".gguf")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	script := path + ".py.tmp"
	if err := os.WriteFile(script, tinyModelScript, 0o644); err != nil {
		return "", err
	}
	defer os.Remove(script)
	tmp := path + ".tmp"
	cmd := exec.Command(python, append([]string{script, tmp}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("write tiny model: %w\n%s", err, out)
	}
	return path, os.Rename(tmp, path)
}

// proc is a process this test started, with its output kept in a file for
// the failure log.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			t.Logf("--- %s log tail ---\n%s", name, out)
		}
	})
	return p
}

// stop ends the process: SIGTERM, then SIGKILL if it lingers.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill ends the process at once, as a crash would.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// freeAddr returns a loopback address no other server of this test binary
// was given. Another process may still take it first: startServer retries
// when its server cannot bind.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := testport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startServer starts a server process listening on a fresh loopback
// address (args builds its arguments from host and port) and waits until
// url+healthPath answers 200. A server that exits because its port was
// taken in the meantime is started again on another port, at most 5 times.
func startServer(t *testing.T, name, bin, healthPath string, args func(host, port string) []string) (*proc, string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		host, port, _ := net.SplitHostPort(addr)
		p := startProc(t, name, bin, args(host, port)...)
		url := "http://" + addr
		err := waitHealthy(p, url+healthPath)
		if err == nil {
			return p, url
		}
		if errors.Is(err, errExited) && attempt < 5 && p.lostPort() {
			t.Logf("%s could not bind %s; starting it again on another port", name, addr)
			continue
		}
		t.Fatal(err)
	}
}

var errExited = errors.New("exited before answering")

// lostPort reports whether the process's log says its port was taken.
func (p *proc) lostPort() bool {
	out, _ := os.ReadFile(p.log)
	out = bytes.ToLower(out)
	return bytes.Contains(out, []byte("couldn't bind")) || bytes.Contains(out, []byte("address already in use"))
}

// waitHealthy polls url until it answers 200 or the process exits; the
// bound keeps a broken start from hanging the run.
func waitHealthy(p *proc, url string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s %w %s", p.name, errExited, url)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer %s with 200 within 60s", p.name, url)
}

// replicaCacheMiB is each replica's prompt cache in RAM (--cache-ram). The
// tiny model's KV cache takes 4 KiB a token (4 layers x 256 wide x K and V x
// f16), so a 1,300-token document takes about 5 MiB and a replica keeps about
// twelve documents besides the one in its slot: a hash ring's share of 12
// documents on 4 replicas is uneven (7 on one replica was seen), and the
// document-QA comparison is about where requests go, not about eviction.
// (With 24 MiB, about four documents, prefixgate fell to 80% of the ideal
// in a run whose ring gave one replica six.)
const replicaCacheMiB = 64

type replica struct {
	*proc
	url string
}

// startReplicas starts n llama-server processes (one slot, one thread, a
// prompt cache in RAM, metrics) and waits until each is healthy.
func startReplicas(t *testing.T, tl tools, n int) []*replica {
	t.Helper()
	rs := make([]*replica, n)
	for i := range rs {
		p, url := startServer(t, fmt.Sprintf("llama-server-%d", i), tl.server, "/health", func(host, port string) []string {
			return []string{"-m", tl.model, "--alias", modelName, "--host", host, "--port", port,
				"-t", "1", "-tb", "1", "-np", "1", "-c", "8192",
				"--cache-ram", strconv.Itoa(replicaCacheMiB), "--metrics", "--no-webui", "--no-warmup"}
		})
		rs[i] = &replica{proc: p, url: url}
	}
	return rs
}

// startRouter starts `prefixgate serve` in front of the replicas with the
// given extra flags (none: the defaults) and waits until it is ready.
func startRouter(t *testing.T, tl tools, rs []*replica, name string, flags ...string) string {
	t.Helper()
	_, url := startServer(t, name, tl.prefixgate, "/readyz", func(host, port string) []string {
		args := []string{"serve", "--listen", net.JoinHostPort(host, port), "--log-level", "warn"}
		for _, r := range rs {
			args = append(args, "--backend", r.url)
		}
		return append(args, flags...)
	})
	return url
}

// startSMG starts SGLang Model Gateway (`smg launch`) in front of the
// replicas with the given policy, for TestPeerSMG.
func startSMG(t *testing.T, bin string, rs []*replica, policy string) string {
	t.Helper()
	_, url := startServer(t, "smg-"+policy, bin, "/health", func(host, port string) []string {
		args := []string{"launch", "--host", host, "--port", port, "--policy", policy, "--worker-urls"}
		for _, r := range rs {
			args = append(args, r.url)
		}
		return args
	})
	// smg answers /health before its workers are registered: wait until it
	// lists the model (workers register a few seconds after start).
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/v1/models")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"`+modelName+`"`) {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("smg did not list model %q within 60s", modelName)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// answer is one chat completion as the client saw it.
type answer struct {
	status  int
	backend string // X-Prefixgate-Backend, or the replica URL when sent directly
	prompt  int    // usage.prompt_tokens
	cached  int    // usage.prompt_tokens_details.cached_tokens
	sent    time.Time
	latency time.Duration
	decode  time.Duration // llama-server's timings.predicted_ms
	// llama-server's timings: prompt tokens computed and the time taken,
	// tokens decoded.
	promptN, decodeN int
	promptMS         float64
	content          string
	err              error
	// client is the index of the concurrent client that sent it (the
	// simulator replays each client's requests in its order, closed-loop).
	client int
}

var client = &http.Client{Timeout: 3 * time.Minute}

// maxTokens keeps decoding short: the tests measure prefill and caching.
const maxTokens = 6

func chat(base string, msgs []message) answer {
	body, _ := json.Marshal(map[string]any{
		"model": modelName, "messages": msgs, "max_tokens": maxTokens, "temperature": 0,
	})
	start := time.Now()
	resp, err := client.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, sent: start, latency: time.Since(start), backend: resp.Header.Get("X-Prefixgate-Backend")}
	if a.backend == "" {
		// SGLang Model Gateway's header, for the peer comparison.
		a.backend = resp.Header.Get("X-Smg-Routed-Worker-Id")
	}
	if err != nil {
		a.err = err
		return a
	}
	if resp.StatusCode != http.StatusOK {
		a.err = fmt.Errorf("status %d: %.300s", resp.StatusCode, raw)
		return a
	}
	var out struct {
		Choices []struct {
			Message message `json:"message"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      *struct {
				CachedTokens *int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		Timings struct {
			PromptN     int     `json:"prompt_n"`
			PromptMS    float64 `json:"prompt_ms"`
			PredictedN  int     `json:"predicted_n"`
			PredictedMS float64 `json:"predicted_ms"`
		} `json:"timings"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		a.err = fmt.Errorf("decode response: %w: %.300s", err, raw)
		return a
	}
	if len(out.Choices) == 0 || out.Usage == nil || out.Usage.Details == nil || out.Usage.Details.CachedTokens == nil {
		a.err = fmt.Errorf("response lacks choices or usage.prompt_tokens_details.cached_tokens: %.300s", raw)
		return a
	}
	a.content = out.Choices[0].Message.Content
	a.prompt = out.Usage.PromptTokens
	a.cached = *out.Usage.Details.CachedTokens
	a.decode = time.Duration(out.Timings.PredictedMS * float64(time.Millisecond))
	a.promptN, a.promptMS, a.decodeN = out.Timings.PromptN, out.Timings.PromptMS, out.Timings.PredictedN
	return a
}

// stats summarizes a set of answers.
type stats struct {
	n              int
	prompt, cached int
	latencies      []time.Duration
	ttfts          []time.Duration // latency less decoding: queue, prefill, transport
	answers        []answer
}

func (s *stats) add(a answer) {
	s.n++
	s.prompt += a.prompt
	s.cached += a.cached
	s.latencies = append(s.latencies, a.latency)
	s.ttfts = append(s.ttfts, a.latency-a.decode)
	s.answers = append(s.answers, a)
}

// hit is the fraction of prompt tokens the replicas found cached.
func (s *stats) hit() float64 {
	if s.prompt == 0 {
		return 0
	}
	return float64(s.cached) / float64(s.prompt)
}

func (s *stats) median() time.Duration { return medianOf(s.latencies) }

// medianTTFT is the median time to the first token, estimated as the
// latency less llama-server's reported decoding time.
func (s *stats) medianTTFT() time.Duration { return medianOf(s.ttfts) }

// meanTTFT is the mean of the same estimate.
func (s *stats) meanTTFT() time.Duration {
	if len(s.ttfts) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range s.ttfts {
		sum += d
	}
	return sum / time.Duration(len(s.ttfts))
}

func medianOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), ds...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[len(l)/2]
}

func (s *stats) String() string {
	return fmt.Sprintf("%d requests, hit %.3f (%d of %d prompt tokens cached), median %v",
		s.n, s.hit(), s.cached, s.prompt, s.median().Round(time.Millisecond))
}

// errFirst returns the first error among answers, for a clear failure.
func errFirst(as []answer) error {
	var errs []error
	for i, a := range as {
		if a.err != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, a.err))
		}
	}
	return errors.Join(errs...)
}
