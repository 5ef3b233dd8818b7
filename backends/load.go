package backends

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// LoadSignals are what a backend's /metrics said at its last scrape. A
// backend that does not publish vLLM's metric names (or no /metrics at all)
// is served all the same: Known is false and the numbers are zero.
type LoadSignals struct {
	// Known is true when the scrape found at least one vLLM metric.
	Known bool
	// Running and Waiting are vllm:num_requests_running and
	// vllm:num_requests_waiting, summed over the backend's engines.
	Running, Waiting float64
	// KVCacheUsage is vllm:kv_cache_usage_perc, 0..1 (1 is full); the
	// highest over the backend's engines.
	KVCacheUsage float64
	// PrefixCacheQueries and PrefixCacheHits are the
	// vllm:prefix_cache_queries_total and _hits_total counters (tokens).
	PrefixCacheQueries, PrefixCacheHits float64
	// PrefixHitRate is hits/queries between the previous scrape and this
	// one; -1 when there is no previous scrape, no new queries, or a
	// counter went backwards (a restart).
	PrefixHitRate float64
	// ScrapedAt is when the scrape finished; zero before the first.
	ScrapedAt time.Time
	// Err is why the last scrape failed, if it did.
	Err error
}

// Load returns the backend's last load signals.
func (b *Backend) Load() LoadSignals {
	if l := b.load.Load(); l != nil {
		return *l
	}
	return LoadSignals{PrefixHitRate: -1}
}

// ScrapeAll reads every backend's /metrics once, concurrently. Run calls
// it every ScrapeInterval. Scrape failures never change health.
func (p *Pool) ScrapeAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, b := range p.Backends() {
		wg.Go(func() { p.scrapeOne(ctx, b) })
	}
	wg.Wait()
}

func (p *Pool) scrapeOne(ctx context.Context, b *Backend) {
	l, err := p.scrape(ctx, b)
	if ctx.Err() != nil {
		return
	}
	l.ScrapedAt = time.Now()
	l.Err = err
	l.PrefixHitRate = -1
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev := b.load.Load(); prev != nil && prev.Known && l.Known {
		dq := l.PrefixCacheQueries - prev.PrefixCacheQueries
		dh := l.PrefixCacheHits - prev.PrefixCacheHits
		if dq > 0 && dh >= 0 && dh <= dq {
			l.PrefixHitRate = dh / dq
		}
	}
	b.load.Store(&l)
}

func (p *Pool) scrape(ctx context.Context, b *Backend) (LoadSignals, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL.String()+"/metrics", nil)
	if err != nil {
		return LoadSignals{}, err
	}
	resp, err := p.probe.Do(req)
	if err != nil {
		return LoadSignals{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return LoadSignals{}, fmt.Errorf("/metrics answered %d", resp.StatusCode)
	}
	return ParseMetrics(io.LimitReader(resp.Body, 8<<20))
}

// ParseMetrics reads the vLLM load signals from Prometheus text exposition
// format. Other metrics, comments, labels and timestamps are skipped.
// Malformed lines are skipped too: one bad metric from a non-vLLM server
// must not hide the rest.
func ParseMetrics(r io.Reader) (LoadSignals, error) {
	var l LoadSignals
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name, v, ok := parseSample(line)
		if !ok {
			continue
		}
		switch string(name) {
		case "vllm:num_requests_running":
			l.Running += v
		case "vllm:num_requests_waiting":
			l.Waiting += v
		case "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc":
			// gpu_cache_usage_perc is the name before vLLM 0.10.
			l.KVCacheUsage = max(l.KVCacheUsage, v)
		case "vllm:prefix_cache_queries_total":
			l.PrefixCacheQueries += v
		case "vllm:prefix_cache_hits_total":
			l.PrefixCacheHits += v
		default:
			continue
		}
		l.Known = true
	}
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("reading /metrics: %w", err)
	}
	return l, nil
}

// parseSample splits `name{labels} value [timestamp]`. Label values may
// hold spaces, braces and escaped quotes.
func parseSample(line []byte) (name []byte, v float64, ok bool) {
	i := bytes.IndexAny(line, "{ \t")
	if i <= 0 {
		return nil, 0, false
	}
	name, rest := line[:i], line[i:]
	if rest[0] == '{' {
		end, inQuote := -1, false
		for j := 1; j < len(rest) && end < 0; j++ {
			switch c := rest[j]; {
			case c == '\\' && inQuote:
				j++
			case c == '"':
				inQuote = !inQuote
			case c == '}' && !inQuote:
				end = j
			}
		}
		if end < 0 {
			return nil, 0, false
		}
		rest = rest[end+1:]
	}
	rest = bytes.TrimLeft(rest, " \t")
	if j := bytes.IndexAny(rest, " \t"); j >= 0 {
		rest = rest[:j] // drop the timestamp
	}
	v, err := strconv.ParseFloat(string(rest), 64)
	if err != nil || v != v { // NaN carries no signal
		return nil, 0, false
	}
	return name, v, true
}
