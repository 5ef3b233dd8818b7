// Package loadgen drives live load against an OpenAI-compatible endpoint for
// `prefixgate bench`: streaming chat completions built from the simulator's
// workloads, in open loop (Poisson arrivals at a rate) or closed loop (a
// fixed number of clients), and reports TTFT, latency, throughput, errors,
// the share of each backend (from the X-Prefixgate-Backend response header)
// and prefix-cache hits (from usage.prompt_tokens_details.cached_tokens).
//
// It owns no routing or simulation; it only measures what a client sees.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prefixgate/prefixgate/internal/sim"
)

// BackendHeader names the backend that served a request.
const BackendHeader = "X-Prefixgate-Backend"

// Options configure a run. Exactly one of Rate and Concurrency is set; at
// least one of Requests and Duration.
type Options struct {
	URL         string // base URL, e.g. http://127.0.0.1:8080
	Model       string // "" asks /v1/models for the first
	Workload    string // a sim workload name or trace:FILE
	Rate        float64
	Concurrency int
	Requests    int
	Duration    time.Duration
	// MaxTokens caps each request's output tokens; 0 keeps the workload's.
	MaxTokens int
	Seed      uint64
	Client    *http.Client
	// Progress, if set, is called after each request with done and total
	// (total 0 when the run is bounded by Duration), one call at a time.
	Progress func(done, total int)
}

// Percentiles in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// Result is what the client saw.
type Result struct {
	URL          string         `json:"url"`
	Workload     string         `json:"workload"`
	Mode         string         `json:"mode"`
	Requests     int            `json:"requests"`
	OK           int            `json:"ok"`
	Errors       int            `json:"errors"`
	ErrorSamples []string       `json:"error_samples,omitempty"`
	TTFT         Percentiles    `json:"ttft_ms"`
	Latency      Percentiles    `json:"latency_ms"`
	Throughput   float64        `json:"throughput_rps"`
	Elapsed      float64        `json:"elapsed_s"`
	PromptTokens int64          `json:"prompt_tokens"`
	CachedTokens int64          `json:"cached_tokens"`
	HitRate      float64        `json:"hit_rate"`
	Backends     map[string]int `json:"backends"`
}

// Validate checks o.
func (o *Options) Validate() error {
	switch {
	case o.URL == "":
		return errors.New("loadgen: --url is required")
	case !strings.HasPrefix(o.URL, "http://") && !strings.HasPrefix(o.URL, "https://"):
		return fmt.Errorf("loadgen: --url %q must start with http:// or https://", o.URL)
	case (o.Rate > 0) == (o.Concurrency > 0):
		return errors.New("loadgen: set exactly one of --rate (open loop) and --concurrency (closed loop)")
	case o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0):
		return fmt.Errorf("loadgen: --rate %v must be a positive number", o.Rate)
	case o.Concurrency < 0:
		return fmt.Errorf("loadgen: --concurrency %d must be positive", o.Concurrency)
	case o.Requests < 0 || o.Duration < 0:
		return errors.New("loadgen: --requests and --duration must not be negative")
	case o.Requests == 0 && o.Duration == 0:
		return errors.New("loadgen: set --requests or --duration")
	}
	return nil
}

type outcome struct {
	ttft, latency  time.Duration
	backend        string
	prompt, cached int64
	err            error
}

// Run sends the load and returns what it measured. It sends nothing when
// a request of the workload would not fit the model's context length as
// the endpoint's /v1/models states it.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	}
	base := strings.TrimRight(o.URL, "/")
	m, err := fleetModel(ctx, o.Client, base, o.Model)
	if err != nil {
		return nil, err
	}
	o.Model = m.ID
	// Enough requests for the run: the count, or a generous pool for a
	// duration (reused round robin).
	pool := o.Requests
	if pool == 0 {
		pool = 10000
	}
	w, err := sim.BuildWorkload(o.Workload, pool, o.Seed)
	if err != nil {
		return nil, err
	}
	if err := checkContextLength(o, w, m); err != nil {
		return nil, err
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	rec := &recorder{progress: o.Progress, total: o.Requests}
	sendOne := func(i int) { rec.add(send(ctx, o.Client, base, body(o, w.Requests[i%len(w.Requests)]))) }
	more := func(i int) bool { return (o.Requests == 0 || i < o.Requests) && ctx.Err() == nil }
	start := time.Now()
	mode := fmt.Sprintf("closed loop, %d clients", o.Concurrency)
	if o.Concurrency > 0 {
		closedLoop(o.Concurrency, more, sendOne)
	} else {
		mode = fmt.Sprintf("open loop, Poisson %g req/s", o.Rate)
		openLoop(ctx, o, start, more, sendOne)
	}
	return summarize(o, w.Name, mode, rec.outs, time.Since(start)), nil
}

// recorder collects outcomes from concurrent senders.
type recorder struct {
	mu       sync.Mutex
	outs     []outcome
	progress func(done, total int)
	total    int
}

func (r *recorder) add(oc outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outs = append(r.outs, oc)
	if r.progress != nil {
		r.progress(len(r.outs), r.total)
	}
}

// closedLoop runs clients senders, each sending request i (numbered across
// them) once the last finished, while more(i), and waits for them.
func closedLoop(clients int, more func(int) bool, sendOne func(int)) {
	var wg sync.WaitGroup
	var next sync.Mutex
	i := 0
	for range clients {
		wg.Go(func() {
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if !more(k) {
					return
				}
				sendOne(k)
			}
		})
	}
	wg.Wait()
}

// openLoop sends request i at Poisson arrivals of o.Rate from start, while
// more(i), and waits for those sent.
func openLoop(ctx context.Context, o Options, start time.Time, more func(int) bool, sendOne func(int)) {
	var wg sync.WaitGroup
	g := seededExp{state: o.Seed}
	t := time.Duration(0)
	for k := 0; more(k); k++ {
		if d := time.Until(start.Add(t)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			if ctx.Err() != nil {
				break
			}
		}
		wg.Go(func() { sendOne(k) })
		t += time.Duration(g.next() / o.Rate * float64(time.Second))
	}
	wg.Wait()
}

func summarize(o Options, workload, mode string, outs []outcome, elapsed time.Duration) *Result {
	res := &Result{URL: o.URL, Workload: workload, Mode: mode, Requests: len(outs), Backends: map[string]int{}, Elapsed: elapsed.Seconds()}
	var ttft, lat []float64
	for _, oc := range outs {
		if oc.err != nil {
			// A run cut short by --duration cancels requests in flight;
			// those are not errors of the endpoint.
			if errors.Is(oc.err, context.DeadlineExceeded) && o.Duration > 0 {
				res.Requests--
				continue
			}
			res.Errors++
			if len(res.ErrorSamples) < 5 && !slices.Contains(res.ErrorSamples, oc.err.Error()) {
				res.ErrorSamples = append(res.ErrorSamples, oc.err.Error())
			}
			continue
		}
		res.OK++
		ttft = append(ttft, float64(oc.ttft)/1e6)
		lat = append(lat, float64(oc.latency)/1e6)
		res.PromptTokens += oc.prompt
		res.CachedTokens += oc.cached
		b := oc.backend
		if b == "" {
			b = "(no header)"
		}
		res.Backends[b]++
	}
	res.TTFT, res.Latency = pct(ttft), pct(lat)
	if elapsed > 0 {
		res.Throughput = float64(res.OK) / elapsed.Seconds()
	}
	if res.PromptTokens > 0 {
		res.HitRate = float64(res.CachedTokens) / float64(res.PromptTokens)
	}
	return res
}

func pct(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	sort.Float64s(xs)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(xs)))) - 1
		return xs[max(0, min(i, len(xs)-1))]
	}
	return Percentiles{P50: q(0.5), P90: q(0.9), P99: q(0.99)}
}

type seededExp struct{ state uint64 }

func (g *seededExp) next() float64 {
	g.state += 0x9e3779b97f4a7c15
	z := g.state
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return -math.Log(1 - float64(z>>11)/(1<<53))
}

func body(o Options, r *sim.Request) []byte {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	roles, texts := r.ChatText()
	msgs := make([]msg, len(roles))
	for i := range roles {
		msgs[i] = msg{roles[i], texts[i]}
	}
	out := r.Output
	if o.MaxTokens > 0 {
		out = min(out, o.MaxTokens)
	}
	b, _ := json.Marshal(map[string]any{
		"model": o.Model, "messages": msgs, "max_tokens": out, "stream": true,
		"stream_options": map[string]bool{"include_usage": true},
	})
	return b
}

// model is one entry of /v1/models.
type model struct {
	ID string `json:"id"`
	// MaxModelLen is vLLM's (and prefixgate's) context length in tokens,
	// prompt and output; 0 when not stated.
	MaxModelLen int `json:"max_model_len"`
}

// fleetModel finds the model to send to in the endpoint's /v1/models: the
// one named, or the first. A named model the list does not state (or an
// endpoint without the list) is sent to all the same, unchecked.
func fleetModel(ctx context.Context, c *http.Client, base, name string) (model, error) {
	ms, status, err := listModels(ctx, c, base)
	if name != "" {
		for _, m := range ms {
			if m.ID == name {
				return m, nil
			}
		}
		return model{ID: name}, nil
	}
	if err != nil {
		return model{}, fmt.Errorf("loadgen: listing models: %w", err)
	}
	if len(ms) == 0 {
		return model{}, fmt.Errorf("loadgen: %s/v1/models lists no model (status %d); pass --model", base, status)
	}
	return ms[0], nil
}

func listModels(ctx context.Context, c *http.Client, base string) ([]model, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []model `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s/v1/models: %w", base, err)
	}
	return list.Data, resp.StatusCode, nil
}

// checkContextLength fails when a request of w, with its output cap, needs
// more tokens than m's context length (counted as the simulator counts
// them, which is how vllmsim counts; a real tokenizer differs a little).
func checkContextLength(o Options, w *sim.Workload, m model) error {
	if m.MaxModelLen <= 0 {
		return nil
	}
	over, most := 0, 0
	for _, r := range w.Requests {
		out := r.Output
		if o.MaxTokens > 0 {
			out = min(out, o.MaxTokens)
		}
		if n := r.PromptTokens() + out; n > m.MaxModelLen {
			over++
			most = max(most, n)
		}
	}
	if over == 0 {
		return nil
	}
	return fmt.Errorf("loadgen: %d of the %d requests of workload %s need more tokens than model %q's context length of %d (max_model_len in /v1/models), up to %d tokens of prompt and output; pick a shorter workload, a lower --max-tokens or a model with a longer context",
		over, len(w.Requests), w.Name, m.ID, m.MaxModelLen, most)
}

// send posts one streaming chat request and reads the stream to its end.
func send(ctx context.Context, c *http.Client, base string, b []byte) outcome {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	oc := outcome{backend: resp.Header.Get(BackendHeader)}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		oc.err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
		return oc
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens int64 `json:"prompt_tokens"`
				Details      *struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			oc.err = fmt.Errorf("bad stream chunk: %v", err)
			return oc
		}
		if chunk.Error != nil {
			oc.err = fmt.Errorf("stream error: %s", chunk.Error.Message)
			return oc
		}
		if oc.ttft == 0 && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			oc.ttft = time.Since(start)
		}
		if chunk.Usage != nil {
			oc.prompt = chunk.Usage.PromptTokens
			if chunk.Usage.Details != nil {
				oc.cached = chunk.Usage.Details.CachedTokens
			}
		}
	}
	if err := sc.Err(); err != nil {
		oc.err = fmt.Errorf("reading stream: %w", err)
		return oc
	}
	oc.latency = time.Since(start)
	if oc.ttft == 0 {
		oc.ttft = oc.latency
	}
	return oc
}
