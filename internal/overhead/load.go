package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// chatBodies builds k distinct OpenAI chat requests of exactly size bytes:
// each is a system message holding a document (distinct from its first line
// on) and a user question, so both a prefix-aware router (which keys on
// every message but the last) and a hash on the body's first bytes spread
// them over the replicas.
func chatBodies(size, k int) [][]byte {
	const prefix = `{"model":"` + stubModel + `","max_tokens":16,"temperature":0,"messages":[{"role":"system","content":"You answer questions about the document. Be brief.\n\n`
	const suffix = `"}]}`
	words := strings.Fields("the replica keeps a cache of every prompt prefix it has seen and skips the prefill " +
		"when a request begins with one of them so routing equal prefixes to one replica saves compute " +
		"latency and memory across a fleet of servers under load")
	out := make([][]byte, k)
	for i := range out {
		rng := rand.New(rand.NewPCG(uint64(size), uint64(i)))
		var b bytes.Buffer
		b.WriteString(prefix)
		fmt.Fprintf(&b, "Document %04d.\\n", i)
		tail := fmt.Sprintf(`"},{"role":"user","content":"Question %d: what does the document say?`, i)
		room := size - len(suffix) - len(tail)
		for b.Len() < room {
			w := words[rng.IntN(len(words))]
			if rng.IntN(12) == 0 {
				w += ".\\n"
			}
			if b.Len()+len(w)+1 > room {
				break
			}
			b.WriteString(w)
			b.WriteByte(' ')
		}
		for b.Len() < room {
			b.WriteByte(' ')
		}
		b.WriteString(tail)
		b.WriteString(suffix)
		out[i] = b.Bytes()
	}
	return out
}

// phase is one closed-loop measurement: c workers each send a request,
// wait for the whole answer, and send the next, over keep-alive
// connections.
type phase struct {
	Concurrency int
	Warmup      int // requests sent and not recorded, before the clock starts
	Requests    int // requests recorded
}

// result is what one phase measured.
type result struct {
	Latencies []time.Duration // one per recorded request, sorted
	Elapsed   time.Duration   // first recorded request sent to last answered
	Errors    int
	Replicas  []int // recorded answers per stub replica
}

func (r result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(len(r.Latencies)) / r.Elapsed.Seconds()
}

// Percentile returns the p-th percentile (0 < p <= 100) by nearest rank.
func (r result) Percentile(p float64) time.Duration {
	return percentile(r.Latencies, p)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// newClient is the load generator's HTTP/1.1 client: keep-alive, enough
// idle connections for every worker, no transparent gzip.
func newClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        4 * concurrency,
			MaxIdleConnsPerHost: 2 * concurrency,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}

// runPhase sends requests to the URLs in turn (one URL: a proxy; several:
// the backends, called directly round-robin), bodies in turn.
func runPhase(ctx context.Context, client *http.Client, urls []string, bodies [][]byte, ph phase, replicas int) (result, error) {
	pr := phaseRun{ctx: ctx, client: client, urls: urls, bodies: bodies, concurrency: ph.Concurrency, replicas: replicas}
	if ph.Warmup > 0 {
		if ws, _ := pr.loop(ph.Warmup, false); anyErr(ws) != nil {
			return result{}, fmt.Errorf("warm-up: %w", anyErr(ws))
		}
	}
	ws, elapsed := pr.loop(ph.Requests, true)
	r := result{Elapsed: elapsed, Replicas: make([]int, replicas)}
	for _, w := range ws {
		r.Latencies = append(r.Latencies, w.lat...)
		r.Errors += w.errors
		for i, c := range w.replicas {
			r.Replicas[i] += c
		}
	}
	slices.Sort(r.Latencies)
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if r.Errors > 0 {
		return r, fmt.Errorf("%d of %d requests failed, first: %w", r.Errors, ph.Requests, anyErr(ws))
	}
	return r, nil
}

// phaseRun is one phase's load: where it goes, what it sends, how many
// workers send it.
type phaseRun struct {
	ctx         context.Context
	client      *http.Client
	urls        []string
	bodies      [][]byte
	concurrency int
	replicas    int
}

// send posts request i and returns the replica that answered (-1 when the
// answer does not say).
func (pr *phaseRun) send(i int, buf *bytes.Buffer) (int, error) {
	req, err := http.NewRequestWithContext(pr.ctx, http.MethodPost, pr.urls[i%len(pr.urls)], bytes.NewReader(pr.bodies[i%len(pr.bodies)]))
	if err != nil {
		return -1, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := pr.client.Do(req)
	if err != nil {
		return -1, err
	}
	buf.Reset()
	_, err = io.Copy(buf, resp.Body)
	resp.Body.Close()
	if err != nil {
		return -1, err
	}
	if resp.StatusCode != http.StatusOK {
		return -1, fmt.Errorf("status %d: %.200s", resp.StatusCode, buf.Bytes())
	}
	return replicaOf(buf.Bytes()), nil
}

// loop runs n requests over the workers, recording latencies if asked.
func (pr *phaseRun) loop(n int, record bool) ([]worker, time.Duration) {
	var next atomic.Int64
	ws := make([]worker, pr.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range ws {
		wg.Add(1)
		go func(w *worker) {
			defer wg.Done()
			pr.work(w, &next, n, record)
		}(&ws[w])
	}
	wg.Wait()
	return ws, time.Since(start)
}

// work is one worker: it takes the next request number until n are taken.
func (pr *phaseRun) work(w *worker, next *atomic.Int64, n int, record bool) {
	var buf bytes.Buffer
	w.replicas = make([]int, pr.replicas)
	if record {
		w.lat = make([]time.Duration, 0, n/pr.concurrency+1)
	}
	for pr.ctx.Err() == nil {
		i := int(next.Add(1)) - 1
		if i >= n {
			return
		}
		t0 := time.Now()
		rep, err := pr.send(i, &buf)
		d := time.Since(t0)
		if err != nil {
			w.errors++
			if w.firstErr == nil {
				w.firstErr = err
			}
			continue
		}
		if record {
			w.lat = append(w.lat, d)
		}
		if rep >= 0 && rep < pr.replicas {
			w.replicas[rep]++
		}
	}
}

// worker is one closed-loop client's record.
type worker struct {
	lat      []time.Duration
	replicas []int
	errors   int
	firstErr error
}

func anyErr(ws []worker) error {
	for _, w := range ws {
		if w.firstErr != nil {
			return w.firstErr
		}
	}
	return nil
}
