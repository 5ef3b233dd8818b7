package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/route"
)

// Options shape a demo run. Zero values take the defaults in parentheses.
type Options struct {
	Replicas    int      // simulated replicas (7, as in the SageMaker benchmark)
	Documents   int      // shared documents (28)
	Words       int      // words per document (1,400: about 3,300 tokens)
	Requests    int      // requests per policy (420)
	Concurrency int      // requests in flight at once (14)
	Speed       float64  // simulated clock speed-up (10)
	CacheBlocks int      // KV cache blocks per replica (1,650: about 8 documents, 29% of them)
	Policies    []string // policies to compare (random, least-outstanding, consistent-hash, prefix-aware, prefix-index)
	Seed        uint64   // workload seed (1)
	// Progress, when set, receives one line per finished policy.
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Replicas == 0 {
		o.Replicas = 7
	}
	if o.Documents == 0 {
		o.Documents = 28
	}
	if o.Words == 0 {
		o.Words = 1400
	}
	if o.Requests == 0 {
		o.Requests = 420
	}
	if o.Concurrency == 0 {
		o.Concurrency = 14
	}
	if o.Speed == 0 {
		o.Speed = 10
	}
	if o.CacheBlocks == 0 {
		o.CacheBlocks = 1650
	}
	if len(o.Policies) == 0 {
		o.Policies = []string{"random", "least-outstanding", "consistent-hash", "prefix-aware", route.DefaultPolicy}
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
}

// Result is one policy's outcome.
type Result struct {
	Policy string
	// Requests that got a whole answer, and those that failed.
	OK, Failed int
	// HitRate is cached prompt tokens / prompt tokens, from the replicas'
	// own usage reports.
	HitRate float64
	// TTFT percentiles measured by the client, in simulated milliseconds
	// (wall time × Speed).
	TTFTp50, TTFTp90 float64
	// Share is each backend's fraction of requests, from the
	// X-Prefixgate-Backend header; MaxShareRatio is the largest × n.
	Share         map[string]float64
	MaxShareRatio float64
	// Decisions counts X-Prefixgate-Decision values (affinity, spill, ...).
	Decisions map[string]int
	// Wall is how long the policy's run took.
	Wall time.Duration
}

// Run runs the workload once per policy and returns one result each.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	opts.defaults()
	docs := makeDocuments(opts.Documents, opts.Words, opts.Seed)
	reqs := makeRequests(opts.Requests, opts.Documents, opts.Seed)
	var results []Result
	for _, policy := range opts.Policies {
		r, err := runPolicy(ctx, opts, policy, docs, reqs)
		if err != nil {
			return results, fmt.Errorf("policy %s: %w", policy, err)
		}
		results = append(results, r)
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "  %-18s done in %v\n", policy, r.Wall.Round(time.Millisecond))
		}
	}
	return results, nil
}

// runPolicy starts a cold fleet and a router with the policy, sends the
// workload and collects what the client saw.
func runPolicy(ctx context.Context, opts Options, policy string, docs []Document, reqs []Request) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", opts.Replicas, vllmsim.Config{
		Preset: "llama-3.1-70b-8xh100",
		Speed:  opts.Speed,
		Engine: vllmsim.EngineConfig{CacheBlocks: opts.CacheBlocks},
		Seed:   opts.Seed,
	})
	if err != nil {
		return Result{}, err
	}
	defer fleet.Close()

	srv, err := server.New(server.Config{Backends: fleet.URLs(), Route: route.Config{Policy: policy, DefaultCacheTokens: opts.CacheBlocks * vllmsim.BlockSize}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return Result{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, ln, 5*time.Second) }()
	defer func() {
		stopServe()
		<-served
	}()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: opts.Concurrency}}

	start := time.Now()
	tally := newTally(policy, opts.Speed)
	sendAll(ctx, opts.Concurrency, reqs, func(rq Request) { tally.add(send(ctx, client, base, docs[rq.Doc], rq)) })
	res := tally.result(opts.Replicas)
	res.Wall = time.Since(start)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// sendAll sends the requests over concurrency workers, each calling do,
// until all are sent or ctx ends, and waits for the workers.
func sendAll(ctx context.Context, concurrency int, reqs []Request, do func(Request)) {
	work := make(chan Request)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for rq := range work {
				do(rq)
			}
		})
	}
	for _, rq := range reqs {
		select {
		case work <- rq:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

// tally adds up what the client saw, from concurrent senders.
type tally struct {
	mu         sync.Mutex
	res        Result
	speed      float64
	ttfts      []float64
	prompt     int64
	cached     int64
	perBackend map[string]int
}

func newTally(policy string, speed float64) *tally {
	return &tally{res: Result{Policy: policy, Share: map[string]float64{}, Decisions: map[string]int{}}, speed: speed, perBackend: map[string]int{}}
}

func (t *tally) add(o outcome, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.res.Failed++
		return
	}
	t.res.OK++
	t.ttfts = append(t.ttfts, o.ttft.Seconds()*1000*t.speed)
	t.prompt += o.promptTokens
	t.cached += o.cachedTokens
	t.perBackend[o.backend]++
	t.res.Decisions[o.decision]++
}

// result is the run's Result over a fleet of replicas, Wall aside.
func (t *tally) result(replicas int) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	res := t.res
	if t.prompt > 0 {
		res.HitRate = float64(t.cached) / float64(t.prompt)
	}
	slices.Sort(t.ttfts)
	res.TTFTp50 = percentile(t.ttfts, 0.50)
	res.TTFTp90 = percentile(t.ttfts, 0.90)
	for name, n := range t.perBackend {
		share := float64(n) / float64(res.OK)
		res.Share[name] = share
		res.MaxShareRatio = max(res.MaxShareRatio, share*float64(replicas))
	}
	return res
}

type outcome struct {
	ttft         time.Duration
	promptTokens int64
	cachedTokens int64
	backend      string
	decision     string
}

// send posts one streaming chat completion through the router and reads the
// stream to its end.
func send(ctx context.Context, client *http.Client, base string, doc Document, rq Request) (outcome, error) {
	body, err := json.Marshal(map[string]any{
		"model": "meta-llama/Llama-3.1-70B-Instruct",
		"messages": []map[string]string{
			{"role": "system", "content": "Answer from this document.\n\n" + doc.Text},
			{"role": "user", "content": rq.Question},
		},
		"max_tokens":     16,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	})
	if err != nil {
		return outcome{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return outcome{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return outcome{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return outcome{}, fmt.Errorf("status %d: %s", resp.StatusCode, msg)
	}
	o := outcome{backend: resp.Header.Get(server.BackendHeader), decision: resp.Header.Get(server.DecisionHeader)}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			return o, nil
		}
		j := gjson.ParseBytes(data)
		if o.ttft == 0 && j.Get("choices.0.delta.content").String() != "" {
			o.ttft = time.Since(start)
		}
		if u := j.Get("usage"); u.Exists() && u.Type != gjson.Null {
			o.promptTokens = u.Get("prompt_tokens").Int()
			o.cachedTokens = u.Get("prompt_tokens_details.cached_tokens").Int()
		}
	}
	if err := sc.Err(); err != nil {
		return o, err
	}
	return o, fmt.Errorf("stream from %s ended without [DONE]", o.backend)
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

// PrintTable writes the comparison for people.
func PrintTable(w io.Writer, opts Options, results []Result) {
	opts.defaults()
	fmt.Fprintf(w, "\n%d simulated replicas (Llama 3.1 70B on 8×H100 timing, clock ×%g), %d requests per policy,\n", opts.Replicas, opts.Speed, opts.Requests)
	fmt.Fprintf(w, "%d shared documents of about %d words, each request a new question; cold caches per policy.\n\n", opts.Documents, opts.Words)
	fmt.Fprintf(w, "%-18s %8s %9s %14s %14s %10s %7s\n", "policy", "ok", "hit rate", "TTFT p50 (ms)", "TTFT p90 (ms)", "max share", "failed")
	for _, r := range results {
		fmt.Fprintf(w, "%-18s %8d %8.1f%% %14.0f %14.0f %9.2fx %7d\n", r.Policy, r.OK, 100*r.HitRate, r.TTFTp50, r.TTFTp90, r.MaxShareRatio, r.Failed)
	}
	// The default policy against each other one, in numbers from this run
	// only: no claim that a run could contradict.
	var def *Result
	for i := range results {
		if results[i].Policy == route.DefaultPolicy {
			def = &results[i]
		}
	}
	if def != nil {
		fmt.Fprintln(w)
		for _, r := range results {
			if r.Policy == def.Policy || r.TTFTp50 <= 0 || r.TTFTp90 <= 0 {
				continue
			}
			fmt.Fprintf(w, "%s (default) vs %s: hit rate %.1f%% vs %.1f%%, P50 TTFT %+.0f%%, P90 TTFT %+.0f%%.\n",
				def.Policy, r.Policy, 100*def.HitRate, 100*r.HitRate, 100*(def.TTFTp50/r.TTFTp50-1), 100*(def.TTFTp90/r.TTFTp90-1))
		}
	}
	fmt.Fprintln(w, "TTFT is measured at the client in simulated milliseconds (wall time × clock speed-up);")
	fmt.Fprintln(w, "hit rate is cached prompt tokens / prompt tokens as the replicas reported them.")
}
