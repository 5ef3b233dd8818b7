package backends

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// LoadSignals are what a backend's /metrics said at its last scrape, read
// through its engine's profile (vLLM, SGLang or llama.cpp; see Engine). A
// backend that publishes none of their metric names (or no /metrics at
// all) is served all the same: Known is false and the numbers are zero.
type LoadSignals struct {
	// Known is true when the scrape found at least one of the engine's
	// load metrics.
	Known bool
	// Engine is the engine whose metric names the scrape found; EngineAuto
	// when none.
	Engine Engine
	// Running and Waiting are the requests being served and queued, summed
	// over the backend's engines or ranks: vllm:num_requests_running and
	// vllm:num_requests_waiting; sglang:num_running_reqs and
	// sglang:num_queue_reqs; llamacpp:requests_processing and
	// llamacpp:requests_deferred.
	Running, Waiting float64
	// KVCacheUsage is the KV cache's fill, 0..1 (1 is full), the highest
	// over the backend's engines: vllm:kv_cache_usage_perc,
	// sglang:token_usage, llamacpp:kv_cache_usage_ratio (older llama.cpp
	// builds only; current ones do not publish it).
	KVCacheUsage float64
	// PrefixCacheQueries and PrefixCacheHits are cumulative prompt-token
	// counters: vllm:prefix_cache_queries_total and _hits_total; for
	// llama.cpp, llamacpp:prompt_tokens_cached_total as hits and that plus
	// llamacpp:prompt_tokens_total (which excludes cached tokens) as
	// queries. Zero for SGLang, which publishes a rate instead.
	PrefixCacheQueries, PrefixCacheHits float64
	// PrefixHitRate is the prefix-cache hit rate, 0..1: for vLLM and
	// llama.cpp, hits/queries between the previous scrape and this one; for
	// SGLang, sglang:cache_hit_rate averaged over ranks. -1 when unknown: no
	// previous scrape, no new queries, or a counter went backwards (a
	// restart).
	PrefixHitRate float64
	// CacheTokens is the KV-cache capacity in tokens that /metrics states
	// (vLLM's vllm:cache_config_info num_gpu_blocks × block_size, summed
	// over engines); 0 when it does not. Backend.CacheTokens also covers
	// engines that state it elsewhere.
	CacheTokens int
	// ScrapedAt is when the scrape finished; zero before the first.
	ScrapedAt time.Time
	// Mark is what Options.ScrapeMark returned just before the scrape was
	// sent; nil without it.
	Mark any
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

// ScrapeAll reads every backend's /metrics once, concurrently, and its
// engine's info endpoint when its capacity is due for a refresh. Run calls
// it every ScrapeInterval. Scrape failures never change health.
func (p *Pool) ScrapeAll(ctx context.Context) {
	var wg sync.WaitGroup
	var changed atomic.Bool
	for _, b := range p.Backends() {
		wg.Go(func() {
			if p.scrapeOne(ctx, b) {
				changed.Store(true)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	if changed.Load() {
		p.notifyMembership() // capacity is part of what members carry
	}
	if p.opts.OnScrape != nil {
		p.opts.OnScrape()
	}
}

// Rescrape reads b's /metrics (and its engine's info when due) now, as a
// round of ScrapeAll does, without waiting for the next round.
func (p *Pool) Rescrape(ctx context.Context, b *Backend) {
	if p.scrapeOne(ctx, b) && ctx.Err() == nil {
		p.notifyMembership()
	}
}

// scrapeOne scrapes b and reports whether its cache capacity changed.
func (p *Pool) scrapeOne(ctx context.Context, b *Backend) bool {
	var mark any
	if p.opts.ScrapeMark != nil {
		mark = p.opts.ScrapeMark(b)
	}
	l, err := p.scrape(ctx, b)
	l.Mark = mark
	if ctx.Err() != nil {
		return false
	}
	if l.Engine != EngineAuto && b.configured == EngineAuto {
		b.detected.Store(uint32(l.Engine))
	}
	capacity, infoErr := p.refreshInfo(ctx, b, l.CacheTokens, err != nil || !l.Known)
	if ctx.Err() != nil {
		return false
	}
	if err != nil && infoErr != nil {
		err = fmt.Errorf("%w; %w", err, infoErr)
	}
	l.ScrapedAt = time.Now()
	l.Err = err
	if l.Engine != EngineSGLang || !l.Known {
		l.PrefixHitRate = -1 // the counters' rate, worked out below
	}
	b.mu.Lock()
	if prev := b.load.Load(); prev != nil && prev.Known && l.Known && l.Engine != EngineSGLang {
		dq := l.PrefixCacheQueries - prev.PrefixCacheQueries
		dh := l.PrefixCacheHits - prev.PrefixCacheHits
		if dq > 0 && dh >= 0 && dh <= dq {
			l.PrefixHitRate = dh / dq
		}
	}
	b.load.Store(&l)
	b.mu.Unlock()
	return b.cacheTokens.Swap(int64(capacity)) != int64(capacity) && !b.removed.Load()
}

// refreshInfo works out b's cache capacity: from /metrics when it stated
// it (vLLM), else from the engine's info endpoint, read at most every
// infoRefresh. An unknown engine whose /metrics told nothing (unknown is
// true) is asked who it is, as often. It returns the capacity to keep.
func (p *Pool) refreshInfo(ctx context.Context, b *Backend, fromMetrics int, unknown bool) (int, error) {
	if fromMetrics > 0 {
		return fromMetrics, nil
	}
	e := b.Engine()
	keep := int(b.cacheTokens.Load())
	if e == EngineVLLM || (e == EngineAuto && !unknown) {
		return keep, nil // vLLM states it on /metrics or not at all
	}
	now := p.now()
	b.mu.Lock()
	due := !now.Before(b.nextInfo)
	if due {
		b.nextInfo = now.Add(infoRefresh)
	}
	b.mu.Unlock()
	if !due {
		return keep, nil
	}
	info, err := p.fetchInfo(ctx, b, e)
	if err != nil {
		return keep, err
	}
	if b.configured == EngineAuto {
		b.detected.Store(uint32(info.engine))
	}
	b.cacheReport.Store(info.cacheReport)
	b.bootstrapPort.Store(int32(info.bootstrapPort))
	return info.cacheTokens, nil
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
	return parseMetrics(io.LimitReader(resp.Body, 8<<20), b.configured)
}

// parseMetrics reads load signals from Prometheus text exposition format.
// With e EngineAuto it detects the engine from the first metric name with an
// engine's prefix (vllm:, sglang:, llamacpp:); only that engine's metrics are
// read. PrefixHitRate is SGLang's gauge, or -1: the other engines' rate needs
// two scrapes. Other metrics, comments, timestamps and malformed lines are
// skipped: one bad metric from a foreign server must not hide the rest.
func parseMetrics(r io.Reader, e Engine) (LoadSignals, error) {
	var l LoadSignals
	var llamaPrompt, llamaCached, hitSum float64
	var llamaHasCached bool
	var hitN int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name, labels, v, ok := parseSample(line)
		if !ok {
			continue
		}
		// A metric's prefix names its engine: the first one found decides
		// an EngineAuto scrape, and only that engine's metrics are read.
		named := detectFromMetricName(name)
		if e == EngineAuto {
			e = named
		}
		if named == EngineAuto || named != e {
			continue
		}
		switch string(name) {
		case "vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing":
			l.Running += v
		case "vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred":
			l.Waiting += v
		case "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "llamacpp:kv_cache_usage_ratio":
			// gpu_cache_usage_perc is vLLM's name before vLLM 0.10.
			l.KVCacheUsage = max(l.KVCacheUsage, v)
		case "vllm:prefix_cache_queries_total":
			l.PrefixCacheQueries += v
		case "vllm:prefix_cache_hits_total":
			l.PrefixCacheHits += v
		case "vllm:cache_config_info":
			// An info gauge: the capacity is in its labels, one series
			// per engine (data-parallel rank).
			blocks, err1 := strconv.ParseInt(string(labelValue(labels, "num_gpu_blocks")), 10, 64)
			size, err2 := strconv.ParseInt(string(labelValue(labels, "block_size")), 10, 64)
			if err1 == nil && err2 == nil && blocks > 0 && size > 0 && blocks <= 1<<32 && size <= 1<<16 {
				l.CacheTokens = min(l.CacheTokens+int(blocks*size), 1<<50) // no overflow from a flood of series
			}
			continue // says nothing about load
		case "sglang:cache_hit_rate":
			hitSum += v
			hitN++
		case "llamacpp:prompt_tokens_total":
			llamaPrompt += v
		case "llamacpp:prompt_tokens_cached_total":
			llamaCached += v
			llamaHasCached = true
		default:
			continue
		}
		l.Known = true
		l.Engine = e
	}
	l.PrefixHitRate = -1
	if hitN > 0 {
		l.PrefixHitRate = min(max(hitSum/float64(hitN), 0), 1)
	}
	if llamaHasCached {
		// prompt_tokens_total counts only the tokens computed, so the
		// tokens looked up are those plus the ones found cached.
		l.PrefixCacheHits, l.PrefixCacheQueries = llamaCached, llamaPrompt+llamaCached
	}
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("reading /metrics: %w", err)
	}
	return l, nil
}

// parseSample splits `name{labels} value [timestamp]`; labels is what is
// between the braces. Label values may hold spaces, braces and escaped
// quotes.
func parseSample(line []byte) (name, labels []byte, v float64, ok bool) {
	i := bytes.IndexAny(line, "{ \t")
	if i <= 0 {
		return nil, nil, 0, false
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
			return nil, nil, 0, false
		}
		labels, rest = rest[1:end], rest[end+1:]
	}
	rest = bytes.TrimLeft(rest, " \t")
	if j := bytes.IndexAny(rest, " \t"); j >= 0 {
		rest = rest[:j] // drop the timestamp
	}
	v, err := strconv.ParseFloat(string(rest), 64)
	if err != nil || v != v || v < 0 || math.IsInf(v, 0) {
		// NaN and infinities carry no signal, and none of the metrics read
		// here can be negative: a load hint must stay a small count.
		return nil, nil, 0, false
	}
	return name, labels, v, true
}

// labelValue returns the raw (still escaped) value of label key in a
// parseSample label set, or nil. Values that need unescaping (the
// numbers read here never do) come back with their backslashes.
func labelValue(labels []byte, key string) []byte {
	for len(labels) > 0 {
		labels = bytes.TrimLeft(labels, " \t,")
		eq := bytes.IndexByte(labels, '=')
		if eq < 0 || eq+1 >= len(labels) || labels[eq+1] != '"' {
			return nil
		}
		k := bytes.TrimSpace(labels[:eq])
		val := labels[eq+2:]
		end := -1
		for j := 0; j < len(val); j++ {
			if val[j] == '\\' {
				j++
				continue
			}
			if val[j] == '"' {
				end = j
				break
			}
		}
		if end < 0 {
			return nil
		}
		if string(k) == key {
			return val[:end]
		}
		labels = val[end+1:]
	}
	return nil
}
