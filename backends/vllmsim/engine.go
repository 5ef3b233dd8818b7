package vllmsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/zeebo/xxh3"
)

// BlockSize is the number of tokens in one KV-cache block, as in vLLM's
// default --block-size.
const BlockSize = 16

// EngineConfig is the model of one vLLM engine: its batch limits, its KV
// cache capacity and its speed.
type EngineConfig struct {
	// MaxNumSeqs is the most requests in the running batch (vLLM's
	// --max-num-seqs). Others wait in FIFO order.
	MaxNumSeqs int
	// CacheBlocks is the KV cache capacity in blocks of BlockSize tokens.
	CacheBlocks int
	// MaxModelLen is the longest prompt plus output, in tokens.
	MaxModelLen int
	// PrefillTokensPerSec is the rate at which uncached prompt tokens are
	// computed by the whole engine; concurrent prefills share it.
	PrefillTokensPerSec float64
	// DecodeStepBase and DecodeStepPerSeq give the time of one decode step
	// (one output token for every running request):
	// DecodeStepBase + DecodeStepPerSeq × running requests.
	DecodeStepBase   time.Duration
	DecodeStepPerSeq time.Duration
	// PrefillOverhead is prefill time every request pays besides its
	// uncached tokens, at the full engine rate; 0 means none (vLLM on a
	// GPU: the presets that leave it 0 model nothing of the kind).
	// llama-server pays it on every request: restoring a saved prompt from
	// its RAM cache (--cache-ram) and computing a short tail at a small
	// batch's poor rate made a cache hit cost about 80 ms of prompt time
	// on the tiny CPU fleet where tokens ÷ rate alone gave about 20 ms.
	PrefillOverhead time.Duration
	// PrefillChunkTokens is vLLM's chunked-prefill budget per step
	// (--max-num-batched-tokens): while requests prefill beside decoding
	// ones, each step carries up to this many prompt tokens and is that
	// much longer for every decoding request. 0 models no interference.
	PrefillChunkTokens int
	// TransferTokensPerSec is how fast a decode worker reads imported KV
	// from a prefill worker (Request.ImportTokens); 0: it imports none.
	TransferTokensPerSec float64
	// TransferTTL is how long a prefill worker holds KV nobody fetches
	// (Request.HoldKV); 0 means DefaultTransferTTL. See transfer.go.
	TransferTTL time.Duration
	// SchedulingPolicy is vLLM's --scheduling-policy: "fcfs" (or "") serves
	// waiting requests in arrival order; "priority" serves them by
	// Request.Priority, lower first, and preempts running requests of lower
	// priority (see priority.go).
	SchedulingPolicy string
}

func (c EngineConfig) validate() error {
	switch {
	case c.MaxNumSeqs <= 0:
		return errors.New("vllmsim: MaxNumSeqs must be positive")
	case c.CacheBlocks <= 0:
		return errors.New("vllmsim: CacheBlocks must be positive")
	case c.MaxModelLen <= 0:
		return errors.New("vllmsim: MaxModelLen must be positive")
	case !(c.PrefillTokensPerSec > 0):
		return errors.New("vllmsim: PrefillTokensPerSec must be positive")
	case c.DecodeStepBase <= 0 || c.DecodeStepPerSeq < 0:
		return errors.New("vllmsim: DecodeStepBase must be positive and DecodeStepPerSeq not negative")
	case c.PrefillOverhead < 0:
		return errors.New("vllmsim: PrefillOverhead must not be negative")
	case c.SchedulingPolicy != "" && c.SchedulingPolicy != SchedulingFCFS && c.SchedulingPolicy != SchedulingPriority:
		return fmt.Errorf("vllmsim: scheduling policy %q is not %s or %s", c.SchedulingPolicy, SchedulingFCFS, SchedulingPriority)
	}
	return nil
}

// DecodeStep returns the duration of one decode step with n running requests.
func (c EngineConfig) DecodeStep(n int) time.Duration {
	return c.DecodeStepBase + time.Duration(n)*c.DecodeStepPerSeq
}

// Request is one generation request submitted to an Engine.
type Request struct {
	// Prompt is the prompt's token ids (see Tokenize).
	Prompt []Token
	// Adapter is the LoRA adapter name, or "" for the base model. It is an
	// extra key of every block hash, so adapters never share cache.
	Adapter string
	// CacheSalt is vLLM's cache_salt: also an extra key of the block hashes.
	CacheSalt string
	// MaxTokens is the number of output tokens; the simulated model always
	// generates exactly this many (finish reason "length"). Values below 1
	// are treated as 1.
	MaxTokens int
	// HoldKV makes this a prefill worker's request: its prompt's KV stays
	// pinned after it finishes until Fetch or the TransferTTL.
	HoldKV bool
	// ImportTokens is the prompt prefix whose KV a decode worker imports
	// from a prefill worker (what Fetch returned) instead of computing it.
	ImportTokens int
	// Priority is vLLM's request priority: with the "priority" scheduling
	// policy, lower values are served first. Ignored under "fcfs".
	Priority int
}

// RequestID identifies a request within one Engine.
type RequestID uint64

// EventKind says what happened to a request.
type EventKind uint8

const (
	// EventFirstToken: prefill finished and the first output token exists.
	EventFirstToken EventKind = iota + 1
	// EventFinished: all output tokens were generated and the request left
	// the batch. A request with MaxTokens 1 reports both events at once.
	EventFinished
)

func (k EventKind) String() string {
	switch k {
	case EventFirstToken:
		return "first_token"
	case EventFinished:
		return "finished"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event reports a request's progress, at engine time Time.
type Event struct {
	Kind         EventKind
	ID           RequestID
	Time         time.Time
	Submitted    time.Time // when Submit was called
	Admitted     time.Time // when it left the waiting queue
	FirstToken   time.Time // when the first output token was produced
	PromptTokens int
	CachedTokens int // prompt tokens served from the prefix cache
	OutputTokens int // tokens generated so far (all of them when finished)
	Transferred  int // prompt tokens read from a prefill worker (Request.ImportTokens)
	HeldTokens   int // prompt tokens held for a decode worker (Request.HoldKV, when finished)
}

// TTFT returns FirstToken - Submitted.
func (e Event) TTFT() time.Duration { return e.FirstToken.Sub(e.Submitted) }

// Errors returned by Submit.
var (
	ErrTooLong     = errors.New("vllmsim: prompt plus max tokens exceed the model's maximum length")
	ErrNoCapacity  = errors.New("vllmsim: request needs more KV cache blocks than the engine has")
	ErrEmptyPrompt = errors.New("vllmsim: empty prompt")
	ErrTimeTravel  = errors.New("vllmsim: time went backwards")
)

// TTFTBuckets are the upper bounds, in seconds, of the TTFT histogram: the
// buckets of vLLM's vllm:time_to_first_token_seconds.
var TTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
	0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}

// Histogram is a cumulative-bucket histogram in Prometheus' sense.
type Histogram struct {
	Bounds []float64 // upper bounds; +Inf is implicit
	Counts []uint64  // Counts[i] observations <= Bounds[i] (not cumulative); len(Bounds)+1
	Sum    float64
	Count  uint64
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

func (h *Histogram) observe(v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += v
	h.Count++
}

// Stats are an Engine's counters and gauges.
type Stats struct {
	Running            int
	Waiting            int
	KVCacheUsage       float64 // fraction of blocks held by running requests, 0..1
	UsedBlocks         int     // blocks held by running requests
	CachedBlocks       int     // free blocks that still hold a cached prefix (evictable)
	PrefixCacheQueries uint64  // prompt tokens looked up in the prefix cache
	PrefixCacheHits    uint64  // of those, tokens found
	PromptTokens       uint64  // prompt tokens of admitted requests
	GenerationTokens   uint64  // output tokens of finished requests
	RequestsFinished   uint64
	RequestsAborted    uint64
	Preemptions        uint64 // running requests sent back to wait (priority policy)
	Evictions          uint64 // cached blocks evicted
	TransferredTokens  uint64 // prompt tokens read from prefill workers
	TTFT               Histogram
}

type phase uint8

const (
	phaseWaiting phase = iota
	phasePrefill
	phaseDecode
	phaseDone
	phaseFetch // reading imported KV (transfer.go)
)

type request struct {
	id        RequestID
	req       Request
	phase     phase
	submitted time.Time
	admitted  time.Time
	first     time.Time
	hashes    []uint64 // chained hashes of the full prompt blocks
	held      []*block // hashed blocks held while running
	private   int      // unhashed blocks held while running (partial block, output)
	cached    int
	prefill   float64 // seconds of prefill work left at full engine rate
	decode    float64 // output tokens left to generate
	fetch     float64 // seconds of KV read left (phaseFetch)
	imported  int     // prompt tokens read from a prefill worker
	runIdx    int     // index in Engine.running
}

type block struct {
	hash       uint64
	ref        int
	prev, next *block // LRU list links while ref == 0
}

// Engine is a deterministic model of one vLLM engine in explicit time. It has
// no goroutines and never reads the wall clock: every method takes the
// current time, which must not go backwards. It is not safe for concurrent
// use.
//
// The running batch progresses continuously between events: requests in
// prefill share PrefillTokensPerSec; each request in decode gains one token
// every DecodeStep(len(running)). Events happen when a prefill or a decode
// completes; the batch then changes and the rates are recomputed.
type Engine struct {
	cfg     EngineConfig
	now     time.Time
	started bool
	nextID  RequestID

	reqs       map[RequestID]*request
	waiting    []*request // FIFO; aborted entries are skipped
	prio       prioQueue  // the waiting requests under the priority policy
	waitHead   int
	numWaiting int
	running    []*request
	prefilling int
	fetching   int       // running requests reading imported KV
	xfer       transfers // KV held for decode workers (transfer.go)

	blocks    map[uint64]*block
	lru       block // sentinel of the LRU list of evictable blocks (next = oldest)
	used      int
	evictable int

	out   []Event
	stats Stats
	buf   []byte
}

// NewEngine returns an engine with the given model.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := cfg.validateTransfer(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:    cfg,
		reqs:   make(map[RequestID]*request),
		blocks: make(map[uint64]*block),
	}
	e.lru.next, e.lru.prev = &e.lru, &e.lru
	e.stats.TTFT = newHistogram(TTFTBuckets)
	return e, nil
}

// Config returns the engine's model.
func (e *Engine) Config() EngineConfig { return e.cfg }

// Now returns the latest time the engine was given.
func (e *Engine) Now() time.Time { return e.now }

// Submit queues a request at time now and returns its id. It may admit the
// request into the running batch at once; its events are reported by later
// calls to Advance. Errors mean the request can never run.
func (e *Engine) Submit(now time.Time, req Request) (RequestID, error) {
	if len(req.Prompt) == 0 {
		return 0, ErrEmptyPrompt
	}
	if req.MaxTokens < 1 {
		req.MaxTokens = 1
	}
	if len(req.Prompt)+req.MaxTokens > e.cfg.MaxModelLen {
		return 0, ErrTooLong
	}
	if blocksFor(len(req.Prompt)+req.MaxTokens) > e.cfg.CacheBlocks {
		return 0, ErrNoCapacity
	}
	if err := e.checkImport(req); err != nil {
		return 0, err
	}
	if err := e.advanceTo(now); err != nil {
		return 0, err
	}
	e.nextID++
	r := &request{id: e.nextID, req: req, submitted: now, runIdx: -1}
	r.hashes = e.blockHashes(req)
	e.reqs[r.id] = r
	e.enqueue(r)
	e.admit()
	return r.id, nil
}

// Advance moves the engine to time now and returns the events that happened
// up to and including now (also those of times passed by Submit or Cancel),
// in time order. The returned slice is reused: it is valid until the next
// call of any Engine method.
func (e *Engine) Advance(now time.Time) []Event {
	if err := e.advanceTo(now); err != nil {
		panic(err)
	}
	out := e.out
	e.out = e.out[:0]
	return out
}

// NextEvent returns the time of the next event if no request is submitted or
// cancelled before it, and false if the engine is idle.
func (e *Engine) NextEvent() (time.Time, bool) {
	d, ok := e.nextDelay()
	if !ok {
		return time.Time{}, false
	}
	return e.now.Add(d), true
}

// Cancel aborts a waiting or running request at time now, freeing its slot
// and blocks (the blocks stay cached). It reports whether the request was
// still in the engine.
func (e *Engine) Cancel(now time.Time, id RequestID) bool {
	if err := e.advanceTo(now); err != nil {
		panic(err)
	}
	r, ok := e.reqs[id]
	if !ok {
		return false
	}
	delete(e.reqs, id)
	switch r.phase {
	case phaseWaiting:
		e.numWaiting--
	case phasePrefill, phaseDecode, phaseFetch:
		e.release(r)
	}
	r.phase = phaseDone
	e.stats.RequestsAborted++
	e.admit()
	return true
}

// Generated returns the number of output tokens a request has produced as of
// the last time given to the engine, and false if it is no longer in the
// engine (finished or cancelled).
func (e *Engine) Generated(id RequestID) (int, bool) {
	r, ok := e.reqs[id]
	if !ok {
		return 0, false
	}
	if r.phase != phaseDecode {
		return 0, true
	}
	return r.req.MaxTokens - int(math.Ceil(r.decode-1e-6)), true
}

// Stats returns the engine's counters. The histogram's slices are copies.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.Running = len(e.running)
	s.Waiting = e.numWaiting
	s.UsedBlocks = e.used
	s.CachedBlocks = e.evictable
	s.KVCacheUsage = float64(e.used) / float64(e.cfg.CacheBlocks)
	s.TTFT.Counts = append([]uint64(nil), e.stats.TTFT.Counts...)
	return s
}

// CachedPrefix returns how many tokens of req's prompt would be served from
// the prefix cache if it were admitted now. It changes nothing.
func (e *Engine) CachedPrefix(req Request) int {
	hashes := e.blockHashes(req)
	n := 0
	for _, h := range hashes[:maxHitBlocks(len(req.Prompt))] {
		if _, ok := e.blocks[h]; !ok {
			break
		}
		n++
	}
	return n * BlockSize
}

func blocksFor(tokens int) int { return (tokens + BlockSize - 1) / BlockSize }

// maxHitBlocks is the most prompt blocks that can be cache hits: whole
// blocks, never including the last prompt token, which must be computed to
// produce the first output token.
func maxHitBlocks(promptTokens int) int { return (promptTokens - 1) / BlockSize }

// blockHashes returns the chained hashes of the prompt's full blocks:
// h[i] = xxh3(h[i-1] || token ids of block i), where h[-1] is the hash of
// the extra keys (adapter and cache salt).
func (e *Engine) blockHashes(req Request) []uint64 {
	n := len(req.Prompt) / BlockSize
	hashes := make([]uint64, n)
	b := e.buf[:0]
	b = append(b, "vllmsim-root\x00lora="...)
	b = append(b, req.Adapter...)
	b = append(b, "\x00salt="...)
	b = append(b, req.CacheSalt...)
	parent := xxh3.Hash(b)
	for i := range n {
		b = binary.LittleEndian.AppendUint64(b[:0], parent)
		for _, t := range req.Prompt[i*BlockSize : (i+1)*BlockSize] {
			b = binary.LittleEndian.AppendUint32(b, t)
		}
		parent = xxh3.Hash(b)
		hashes[i] = parent
	}
	e.buf = b
	return hashes
}

func (e *Engine) advanceTo(now time.Time) error {
	if !e.started {
		e.started = true
		e.now = now
		return nil
	}
	if now.Before(e.now) {
		return fmt.Errorf("%w: %v before %v", ErrTimeTravel, now, e.now)
	}
	for {
		d, ok := e.nextDelay()
		if !ok || e.now.Add(d).After(now) {
			e.progress(now.Sub(e.now))
			e.now = now
			e.expireTransfers()
			return nil
		}
		e.progress(d)
		e.now = e.now.Add(d)
		e.complete()
		e.admit()
	}
}

// nextDelay returns the time until the first running request completes its
// current phase.
func (e *Engine) nextDelay() (time.Duration, bool) {
	if len(e.running) == 0 {
		return 0, false
	}
	prefill, tokens := e.rates()
	best := math.Inf(1)
	for _, r := range e.running {
		var s float64
		switch r.phase {
		case phasePrefill:
			s = r.prefill / prefill
		case phaseFetch:
			s = r.fetch
		default:
			s = r.decode / tokens
		}
		best = min(best, s)
	}
	d := time.Duration(math.Ceil(best * 1e9))
	return max(d, 0), true
}

// progress moves the running batch forward by d at the current rates.
func (e *Engine) progress(d time.Duration) {
	if d <= 0 || len(e.running) == 0 {
		return
	}
	sec := d.Seconds()
	prefill, tokens := e.rates()
	for _, r := range e.running {
		switch r.phase {
		case phasePrefill:
			r.prefill -= prefill * sec
		case phaseFetch:
			r.fetch -= sec
		default:
			r.decode -= tokens * sec
		}
	}
}

// complete turns finished phases into events at e.now.
func (e *Engine) complete() {
	for i := 0; i < len(e.running); i++ {
		r := e.running[i]
		switch {
		case r.phase == phasePrefill && r.prefill <= 1e-9 && !r.first.IsZero():
			// A preempted request recomputed its context: decoding resumes.
			e.prefilling--
			r.phase = phaseDecode
			continue
		case r.phase == phasePrefill && r.prefill <= 1e-9:
			e.prefilling--
			r.phase = phaseDecode
			r.first = e.now
			e.stats.TTFT.observe(r.first.Sub(r.submitted).Seconds())
			e.out = append(e.out, e.event(EventFirstToken, r, 1))
			if r.req.MaxTokens > 1 {
				r.decode = float64(r.req.MaxTokens - 1)
				continue
			}
		case r.phase == phaseFetch:
			if r.fetch <= 1e-9 {
				e.fetched(r)
			}
			continue
		case r.phase == phaseDecode && r.decode <= 1e-6:
		default:
			continue
		}
		// Finished.
		e.holdKV(r)
		e.out = append(e.out, e.event(EventFinished, r, r.req.MaxTokens))
		e.stats.GenerationTokens += uint64(r.req.MaxTokens)
		e.stats.RequestsFinished++
		delete(e.reqs, r.id)
		e.release(r)
		r.phase = phaseDone
		i-- // release moved another request into slot i
	}
}

func (e *Engine) event(k EventKind, r *request, out int) Event {
	return Event{
		Kind: k, ID: r.id, Time: e.now,
		Submitted: r.submitted, Admitted: r.admitted, FirstToken: r.first,
		PromptTokens: len(r.req.Prompt), CachedTokens: r.cached, OutputTokens: out,
		Transferred: r.imported, HeldTokens: e.heldTokens(r.id),
	}
}

// admit moves requests from the head of the waiting queue into the running
// batch while there is a free slot and enough free or evictable blocks
// (first come, first served: a request that does not fit blocks the ones
// behind it).
func (e *Engine) admit() {
	if e.cfg.SchedulingPolicy == SchedulingPriority {
		e.admitPriority()
		return
	}
	for e.numWaiting > 0 && len(e.running) < e.cfg.MaxNumSeqs {
		r := e.waiting[e.waitHead]
		if r.phase != phaseWaiting { // cancelled
			e.popWaiting()
			continue
		}
		total := blocksFor(len(r.req.Prompt) + r.req.MaxTokens)
		if !e.fits(r, total) {
			return
		}
		e.popWaiting()
		e.numWaiting--
		e.start(r, total)
	}
}

// fits reports whether r, needing total blocks, finds them free or
// evictable now.
func (e *Engine) fits(r *request, total int) bool {
	need := total - len(r.hashes)
	reuseFree := 0
	for _, h := range r.hashes {
		if b, ok := e.blocks[h]; !ok {
			need++
		} else if b.ref == 0 {
			reuseFree++
		}
	}
	return need <= e.cfg.CacheBlocks-e.used-reuseFree
}

func (e *Engine) popWaiting() {
	e.waiting[e.waitHead] = nil
	e.waitHead++
	if e.waitHead == len(e.waiting) {
		e.waiting, e.waitHead = e.waiting[:0], 0
	} else if e.waitHead > 1024 && e.waitHead*2 > len(e.waiting) {
		n := copy(e.waiting, e.waiting[e.waitHead:])
		clear(e.waiting[n:])
		e.waiting, e.waitHead = e.waiting[:n], 0
	}
}

// start admits r: looks up and pins its cached prefix, allocates the rest of
// its blocks (evicting least recently used cached blocks) and starts prefill.
func (e *Engine) start(r *request, total int) {
	hit := 0
	limit := maxHitBlocks(len(r.req.Prompt))
	contiguous := true
	// Pin existing blocks first so allocation cannot evict them.
	r.held = make([]*block, len(r.hashes))
	for i, h := range r.hashes {
		b, ok := e.blocks[h]
		if !ok {
			contiguous = false
			continue
		}
		if contiguous && i < limit {
			hit++
		}
		if b.ref == 0 {
			e.lruRemove(b)
			e.evictable--
			e.used++
		}
		b.ref++
		r.held[i] = b
	}
	for i, h := range r.hashes {
		if r.held[i] == nil {
			e.allocate(1)
			b := &block{hash: h, ref: 1}
			e.blocks[h] = b
			r.held[i] = b
		}
	}
	r.private = total - len(r.hashes)
	e.allocate(r.private)

	e.stats.PrefixCacheQueries += uint64(len(r.req.Prompt))
	e.stats.PrefixCacheHits += uint64(hit * BlockSize)
	e.stats.PromptTokens += uint64(len(r.req.Prompt))

	uncached := len(r.req.Prompt) - hit*BlockSize
	if r.first.IsZero() {
		r.cached = hit * BlockSize
	} else {
		// Resumed after preemption: the prompt's uncached part and every
		// token generated so far are computed again.
		uncached += r.generated()
	}
	r.prefill = max(float64(uncached)/e.cfg.PrefillTokensPerSec+e.cfg.PrefillOverhead.Seconds(), e.cfg.DecodeStep(len(e.running)+1).Seconds())
	r.phase = phasePrefill
	r.admitted = e.now
	r.runIdx = len(e.running)
	e.running = append(e.running, r)
	e.prefilling++
	e.startImport(r, hit)
}

// allocate takes n blocks, evicting cached blocks when no free ones are left.
// The caller has checked that enough blocks are free or evictable.
func (e *Engine) allocate(n int) {
	for range n {
		if e.used+e.evictable >= e.cfg.CacheBlocks {
			b := e.lru.next
			if b == &e.lru {
				panic("vllmsim: KV cache accounting broken")
			}
			e.lruRemove(b)
			delete(e.blocks, b.hash)
			e.evictable--
			e.stats.Evictions++
		}
		e.used++
	}
}

// release returns r's blocks. Hashed blocks nobody else holds stay cached and
// become evictable; they are queued last block first, so that the tail of a
// prefix is evicted before its head.
func (e *Engine) release(r *request) {
	if r.phase == phasePrefill {
		e.prefilling--
	}
	if r.phase == phaseFetch {
		e.fetching--
	}
	for i := len(r.held) - 1; i >= 0; i-- {
		b := r.held[i]
		b.ref--
		if b.ref == 0 {
			e.used--
			e.evictable++
			e.lruPush(b)
		}
	}
	r.held = nil
	e.used -= r.private
	r.private = 0
	last := len(e.running) - 1
	moved := e.running[last]
	e.running[r.runIdx] = moved
	moved.runIdx = r.runIdx
	e.running[last] = nil
	e.running = e.running[:last]
	r.runIdx = -1
}

func (e *Engine) lruPush(b *block) {
	b.prev = e.lru.prev
	b.next = &e.lru
	e.lru.prev.next = b
	e.lru.prev = b
}

func (e *Engine) lruRemove(b *block) {
	b.prev.next = b.next
	b.next.prev = b.prev
	b.prev, b.next = nil, nil
}
