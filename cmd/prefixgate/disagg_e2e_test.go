package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// A disaggregated fleet end to end, once per wire protocol: two prefill
// and two decode workers, each its own `prefixgate vllmsim --role`
// process, `prefixgate serve` splitting every request in front of them,
// the OpenAI Python SDK plain and streamed through it, and workers killed
// or dropping connections under load. Every process runs under one
// deadline and is stopped by its pid.

const pdDeadline = 4 * time.Minute

// pdWorker is one vllmsim process.
type pdWorker struct {
	cmd  *exec.Cmd
	addr string
	dead bool
}

type pdFleet struct {
	base            string
	prefill, decode []*pdWorker
	logs            *lockedBuffer
}

func startPDWorker(ctx context.Context, t *testing.T, role, name string) *pdWorker {
	t.Helper()
	cmd, out, logs := startUnder(ctx, t, "vllmsim", "--listen", "127.0.0.1:0", "--role", role, "--name", name, "--preset", "tiny")
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("vllmsim %s printed no URL: %v\n%s", name, sc.Err(), logs.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return &pdWorker{cmd: cmd, addr: hostport(strings.TrimSpace(sc.Text()))}
}

// startPDFleet starts the workers and the router, which splits every
// request (disaggregation.split always) in the given protocol.
func startPDFleet(ctx context.Context, t *testing.T, protocol string) *pdFleet {
	t.Helper()
	f := &pdFleet{}
	var specs []string
	for i := range 2 {
		p, d := startPDWorker(ctx, t, "prefill", fmt.Sprint("p", i)), startPDWorker(ctx, t, "decode", fmt.Sprint("d", i))
		f.prefill, f.decode = append(f.prefill, p), append(f.decode, d)
		specs = append(specs, "prefill+vllm+http://"+p.addr, "decode+vllm+http://"+d.addr)
	}
	addr := freeAddr(t)
	_, out, logs := startUnder(ctx, t, "serve", "--listen", addr, "--backend", strings.Join(specs, ","),
		"--disagg-split", "always", "--disagg-protocol", protocol, "--disagg-bootstrap-port", "-1",
		"--probe-interval", "200ms", "--log-level", "warn")
	go func() { _, _ = io.Copy(io.Discard, out) }()
	f.base, f.logs = "http://"+addr, logs
	waitFor(t, "the router to list the workers' model", func() bool {
		resp, err := http.Get(f.base + "/v1/models")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list struct{ Data []struct{ ID string } }
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&list) == nil &&
			len(list.Data) > 0 && list.Data[0].ID == frontDoorModel && routerReady(f.base)
	})
	return f
}

func TestDisaggregatedFleet(t *testing.T) {
	binary(t)
	for _, protocol := range []string{server.ProtocolVLLM, server.ProtocolSGLang} {
		t.Run(protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), pdDeadline)
			defer cancel()
			f := startPDFleet(ctx, t, protocol)
			defer func() {
				if t.Failed() {
					t.Logf("router log:\n%s", f.logs.String())
				}
			}()
			t.Run("openai sdk", func(t *testing.T) { f.checkSDK(ctx, t) })
			t.Run("prefill connections dropped", func(t *testing.T) { f.checkFault(ctx, t, f.prefill[1]) })
			t.Run("decode connections dropped", func(t *testing.T) { f.checkFault(ctx, t, f.decode[0]) })
			t.Run("prefill worker killed", func(t *testing.T) { f.checkKill(ctx, t, f.prefill[0], false) })
			t.Run("decode worker killed", func(t *testing.T) { f.checkKill(ctx, t, f.decode[0], true) })
		})
	}
}

// pdSystem is a system prompt of many blocks, distinct per tag.
func pdSystem(tag string) string {
	return tag + strings.Repeat(" a long shared context that the prefill worker computes once", 30)
}

// checkSDK: the SDK's plain and streamed answers come from a decode worker
// after a prefill worker, both named in the headers, and the decode worker
// reports the prefix it took from the prefill worker as cached.
func (f *pdFleet) checkSDK(ctx context.Context, t *testing.T) {
	py := e2ePython(t)
	script := exec.CommandContext(ctx, py, filepath.Join("testdata", "disagg_openai.py"), f.base, pdSystem("sdk"))
	var stderr bytes.Buffer
	script.Stderr = &stderr
	out, err := script.Output()
	if err != nil {
		t.Fatalf("disagg_openai.py: %v\n%s", err, stderr.String())
	}
	var res map[string]struct {
		Status         int
		Backend        string
		PrefillBackend string `json:"prefill_backend"`
		Text           string
		PromptTokens   int `json:"prompt_tokens"`
		CachedTokens   int `json:"cached_tokens"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != 2 {
		t.Fatalf("disagg_openai.py printed %s: %v", out, err)
	}
	for name, r := range res {
		if r.Status != 200 || r.Text == "" || !f.has(f.decode, r.Backend) || !f.has(f.prefill, r.PrefillBackend) {
			t.Errorf("%s: status %d, text %q, decode %q, prefill %q", name, r.Status, r.Text, r.Backend, r.PrefillBackend)
		}
		// The prompt's whole blocks but its last token came from the
		// prefill worker.
		if r.CachedTokens <= 0 || r.CachedTokens < r.PromptTokens-2*16 {
			t.Errorf("%s: %d of %d prompt tokens cached on the decode worker; want the transferred prefix", name, r.CachedTokens, r.PromptTokens)
		}
	}
}

func (f *pdFleet) has(ws []*pdWorker, addr string) bool {
	return slices.ContainsFunc(ws, func(w *pdWorker) bool { return w.addr == addr })
}

// pdResult is one request's fate.
type pdResult struct {
	status           int
	backend, prefill string
	complete         bool
	err              error
}

// pdLoad sends n requests at once, every other one streamed, each of
// maxTokens, and returns what became of each.
func (f *pdFleet) pdLoad(ctx context.Context, tag string, n, maxTokens int, started chan<- struct{}) []pdResult {
	out := make([]pdResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = f.pdRequest(ctx, fmt.Sprintf("%s-%d", tag, i), i%2 == 1, maxTokens) })
	}
	if started != nil {
		close(started)
	}
	wg.Wait()
	return out
}

func (f *pdFleet) pdRequest(ctx context.Context, tag string, stream bool, maxTokens int) pdResult {
	body, _ := json.Marshal(map[string]any{
		"model": frontDoorModel, "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]string{{"role": "system", "content": pdSystem(tag)}, {"role": "user", "content": "go on"}},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return pdResult{err: err}
	}
	defer resp.Body.Close()
	r := pdResult{status: resp.StatusCode, backend: resp.Header.Get(server.BackendHeader), prefill: resp.Header.Get(server.PrefillBackendHeader)}
	raw, err := io.ReadAll(resp.Body)
	r.err = err
	if stream {
		r.complete = err == nil && bytes.Contains(raw, []byte("data: [DONE]"))
	} else {
		var a struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		r.complete = err == nil && json.Unmarshal(raw, &a) == nil && a.Usage.CompletionTokens == maxTokens
	}
	if r.status != http.StatusOK && r.err == nil {
		r.err = fmt.Errorf("%d: %.300s", r.status, raw)
	}
	return r
}

// allAnswered fails for any request that did not get a whole 200 answer.
func allAnswered(t *testing.T, results []pdResult) {
	t.Helper()
	for i, r := range results {
		if r.status != http.StatusOK || !r.complete {
			t.Errorf("request %d: status %d, complete %v, decode %q, prefill %q: %v", i, r.status, r.complete, r.backend, r.prefill, r.err)
		}
	}
}

// setFault sets a worker's injected faults.
func setFault(t *testing.T, w *pdWorker, faults string) {
	t.Helper()
	resp, err := http.Post("http://"+w.addr+"/admin/faults", "application/json", strings.NewReader(faults))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /admin/faults %s: %d", faults, resp.StatusCode)
	}
}

// checkFault: while w closes every connection without an answer, every
// request is answered whole (another prefill worker or aggregated on the
// decode worker; another decode worker).
func (f *pdFleet) checkFault(ctx context.Context, t *testing.T, w *pdWorker) {
	f.whole(t)
	setFault(t, w, `{"close_connection":true}`)
	results := f.pdLoad(ctx, "fault-"+w.addr, 8, 8, nil)
	setFault(t, w, `{}`)
	allAnswered(t, results)
	f.settled(t)
}

// checkKill kills w while requests run through it. Every request is
// answered: whole, or, when w was its decode worker and had begun, with
// an error.
func (f *pdFleet) checkKill(ctx context.Context, t *testing.T, w *pdWorker, decode bool) {
	f.whole(t)
	legsBefore, streamsBefore := prefillLegs(f.base), firstBytes(f.base, w.addr)
	started := make(chan struct{})
	done := make(chan []pdResult, 1)
	go func() { done <- f.pdLoad(ctx, "kill-"+w.addr, 12, 300, started) }()
	<-started
	// A decode worker dies once its streams have begun (the router has
	// their first bytes), a prefill worker once this load's prefill legs
	// have begun.
	waitFor(t, w.addr+" to be serving", func() bool {
		if decode {
			return firstBytes(f.base, w.addr) > streamsBefore
		}
		return prefillLegs(f.base) > legsBefore
	})
	if err := syscall.Kill(w.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w.cmd.Wait()
	w.dead = true
	results := <-done
	split, cut := 0, 0
	for i, r := range results {
		if r.prefill != "" {
			split++
		}
		if r.status == http.StatusOK && r.complete {
			continue
		}
		cut++
		if !decode || r.backend != w.addr {
			t.Errorf("request %d: status %d, complete %v, decode %q, prefill %q: %v", i, r.status, r.complete, r.backend, r.prefill, r.err)
		}
	}
	if split == 0 {
		t.Errorf("none of %d requests was split", len(results))
	}
	t.Logf("%d of %d requests split, %d cut off with their decode worker", split, len(results), cut)
	// The fleet still serves with one worker of each role fewer.
	allAnswered(t, f.pdLoad(ctx, "after-"+w.addr, 4, 4, nil))
	f.settled(t)
}

// whole waits until every live worker is in the router's candidate set
// again (an ejected one returns after its backoff).
func (f *pdFleet) whole(t *testing.T) {
	t.Helper()
	live := 0
	for _, w := range append(slices.Clone(f.prefill), f.decode...) {
		if !w.dead {
			live++
		}
	}
	waitFor(t, "every live worker to be healthy", func() bool {
		m, err := metricsText(f.base)
		return err == nil && metricSum(m, "prefixgate_backend_healthy") == float64(live)
	})
}

// settled waits until no request is in flight at the router (either leg)
// or at any live worker.
func (f *pdFleet) settled(t *testing.T) {
	t.Helper()
	waitFor(t, "every leg to end", func() bool {
		m, err := metricsText(f.base)
		if err != nil || metricSum(m, "prefixgate_backend_in_flight") != 0 || metricSum(m, "prefixgate_disagg_prefill_in_flight") != 0 ||
			!hasSeries(m, "prefixgate_disagg_prefill_in_flight", f.prefill[1].addr) || !hasSeries(m, "prefixgate_backend_in_flight", f.decode[1].addr) {
			return false
		}
		for _, w := range append(slices.Clone(f.prefill), f.decode...) {
			if !w.dead && workerLoad(w) != 0 {
				return false
			}
		}
		return true
	})
}

// workerLoad is a worker's running plus waiting requests; -1 when its
// /metrics cannot be read.
func workerLoad(w *pdWorker) float64 {
	m, err := metricsText("http://" + w.addr)
	if err != nil {
		return -1
	}
	return metricSum(m, "vllm:num_requests_running") + metricSum(m, "vllm:num_requests_waiting")
}

// firstBytes is how many answers from backend have begun, as the router
// counts them.
func firstBytes(base, backend string) float64 {
	m, err := metricsText(base)
	if err != nil {
		return 0
	}
	name := `prefixgate_backend_first_byte_seconds_count{backend="` + backend + `"} `
	for _, line := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}

// prefillLegs is how many prefill legs the router has sent.
func prefillLegs(base string) float64 {
	m, err := metricsText(base)
	if err != nil {
		return 0
	}
	n := 0.0
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "prefixgate_disagg_legs_total{") && strings.Contains(line, `leg="prefill"`) {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			n += v
		}
	}
	return n
}

func metricsText(base string) (string, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// hasSeries reports whether the metric has a series for backend.
func hasSeries(text, name, backend string) bool {
	return strings.Contains(text, name+`{backend="`+backend+`"}`)
}

// metricSum adds up every series of the metric name.
func metricSum(text, name string) float64 {
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}
