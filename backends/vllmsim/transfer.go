package vllmsim

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Prefill/decode disaggregation in the engine model.
//
// A prefill worker's request (Request.HoldKV) computes its prompt, makes
// its one token and finishes, but the KV of its prompt's full blocks stays
// pinned until a decode worker fetches it (Fetch) or TransferTTL passes;
// an unknown, already fetched or expired transfer fails with
// ErrUnknownTransfer, as vLLM's NIXL connector fails a read of blocks the
// prefill worker has freed. A decode worker's request that imports a
// transfer (Request.ImportTokens) pins its blocks at admission, reads the
// part it does not hold locally at TransferTokensPerSec (during which it
// computes nothing and slows no one), then computes the rest of its prompt
// (at least its last token) and decodes; it reports the imported prefix
// as cached tokens, as vLLM counts tokens a KV connector loaded, and keeps
// the blocks in its prefix cache afterwards.
//
// Prefill interference: with PrefillChunkTokens set, a step of the batch
// carries, while any request is prefilling and any is decoding, a chunk of
// up to PrefillChunkTokens prompt tokens (vLLM's chunked prefill under
// --max-num-batched-tokens), which lengthens that step for every decoding
// request by the chunk's compute time. Without it, prefill and decode
// proceed independently and prefill slows no decode step.

// DefaultTransferTTL is EngineConfig.TransferTTL when it is 0: how long a
// prefill worker holds KV nobody fetches (vLLM's
// VLLM_NIXL_ABORT_REQUEST_TIMEOUT default).
const DefaultTransferTTL = 480 * time.Second

// MaxHeldTransfers bounds the transfers one engine holds; past it the
// oldest is dropped as if expired.
const MaxHeldTransfers = 1 << 16

// Errors of the transfer model.
var (
	// ErrUnknownTransfer: Fetch of a transfer the engine does not hold
	// (never made, already fetched, expired or dropped).
	ErrUnknownTransfer = errors.New("vllmsim: unknown or expired KV transfer")
	// ErrNoTransfer: ImportTokens on an engine whose TransferTokensPerSec
	// is 0 (it has no KV connector).
	ErrNoTransfer = errors.New("vllmsim: engine imports no KV (TransferTokensPerSec is 0)")
	// ErrBadImport: ImportTokens negative or beyond the prompt.
	ErrBadImport = errors.New("vllmsim: ImportTokens outside 0..prompt length")
)

// validateTransfer checks the disaggregation fields of c.
func (c EngineConfig) validateTransfer() error {
	switch {
	case c.PrefillChunkTokens < 0:
		return fmt.Errorf("vllmsim: PrefillChunkTokens %d is negative", c.PrefillChunkTokens)
	case c.TransferTokensPerSec < 0 || math.IsNaN(c.TransferTokensPerSec) || math.IsInf(c.TransferTokensPerSec, 0):
		return fmt.Errorf("vllmsim: TransferTokensPerSec %v is not a rate", c.TransferTokensPerSec)
	case c.TransferTTL < 0:
		return fmt.Errorf("vllmsim: TransferTTL %v is negative", c.TransferTTL)
	}
	return nil
}

// mergeTransfer sets e's disaggregation fields that o sets (non-zero).
func (e *EngineConfig) mergeTransfer(o EngineConfig) {
	if o.PrefillChunkTokens != 0 {
		e.PrefillChunkTokens = o.PrefillChunkTokens
	}
	if o.TransferTokensPerSec != 0 {
		e.TransferTokensPerSec = o.TransferTokensPerSec
	}
	if o.TransferTTL != 0 {
		e.TransferTTL = o.TransferTTL
	}
}

// checkImport validates a request's transfer fields at Submit.
func (e *Engine) checkImport(req Request) error {
	switch {
	case req.ImportTokens < 0 || req.ImportTokens > len(req.Prompt):
		return fmt.Errorf("%w: %d of %d", ErrBadImport, req.ImportTokens, len(req.Prompt))
	case req.ImportTokens > 0 && !(e.cfg.TransferTokensPerSec > 0):
		return ErrNoTransfer
	}
	return nil
}

// heldKV is one transfer a prefill worker holds.
type heldKV struct {
	id      RequestID
	blocks  []*block
	tokens  int
	expires time.Time
}

// transfers are the KV a prefill worker holds for decode workers, in the
// order made (which, with one TTL, is the order they expire in).
type transfers struct {
	byID  map[RequestID]*heldKV
	order []*heldKV
	head  int
}

// holdKV keeps the KV of a finishing prefill request's prompt pinned for
// a decode worker (called before release unpins it).
func (e *Engine) holdKV(r *request) {
	n := min(len(r.held), maxHitBlocks(len(r.req.Prompt)))
	if !r.req.HoldKV || n == 0 {
		return
	}
	x := &e.xfer
	if x.byID == nil {
		x.byID = make(map[RequestID]*heldKV)
	}
	if len(x.byID) >= MaxHeldTransfers {
		e.dropTransfer(x.order[x.head])
	}
	h := &heldKV{id: r.id, blocks: append([]*block(nil), r.held[:n]...), tokens: n * BlockSize, expires: e.now.Add(e.ttl())}
	for _, b := range h.blocks {
		b.ref++
	}
	x.byID[r.id] = h
	x.order = append(x.order, h)
}

func (e *Engine) ttl() time.Duration {
	if e.cfg.TransferTTL > 0 {
		return e.cfg.TransferTTL
	}
	return DefaultTransferTTL
}

// Fetch hands the KV a prefill request (Request.HoldKV) left at time now
// to a decode worker and unpins it here (the blocks stay in the prefix
// cache, evictable): it returns the tokens whose KV moves, the prompt's
// full blocks but never its last token, which the decode worker computes
// (Request.ImportTokens). The request's EventFinished says whether it
// holds any (Event.HeldTokens). It fails with ErrUnknownTransfer for a
// transfer this engine does not hold.
func (e *Engine) Fetch(now time.Time, id RequestID) (int, error) {
	if err := e.advanceTo(now); err != nil {
		return 0, err
	}
	h, ok := e.xfer.byID[id]
	if !ok {
		return 0, fmt.Errorf("%w: request %d", ErrUnknownTransfer, id)
	}
	e.dropTransfer(h)
	e.admit()
	return h.tokens, nil
}

// Release drops a held transfer without fetching it (the decode leg was
// aborted); false if the engine does not hold it.
func (e *Engine) Release(now time.Time, id RequestID) bool {
	if err := e.advanceTo(now); err != nil {
		panic(err)
	}
	h, ok := e.xfer.byID[id]
	if !ok {
		return false
	}
	e.dropTransfer(h)
	e.admit()
	return true
}

// HeldTransfers is the number of transfers the engine holds.
func (e *Engine) HeldTransfers() int { return len(e.xfer.byID) }

// dropTransfer unpins h's blocks and forgets it.
func (e *Engine) dropTransfer(h *heldKV) {
	for _, b := range h.blocks {
		b.ref--
		if b.ref == 0 {
			e.used--
			e.evictable++
			e.lruPush(b)
		}
	}
	h.blocks = nil
	delete(e.xfer.byID, h.id)
	x := &e.xfer
	for x.head < len(x.order) && x.order[x.head].blocks == nil {
		x.order[x.head] = nil
		x.head++
	}
	if x.head == len(x.order) {
		x.order, x.head = x.order[:0], 0
	} else if x.head > 1024 && x.head*2 > len(x.order) {
		n := copy(x.order, x.order[x.head:])
		clear(x.order[n:])
		x.order, x.head = x.order[:n], 0
	}
}

// expireTransfers drops the transfers whose TTL has passed by e.now.
func (e *Engine) expireTransfers() {
	x := &e.xfer
	dropped := false
	for x.head < len(x.order) && !x.order[x.head].expires.After(e.now) {
		e.dropTransfer(x.order[x.head])
		dropped = true
	}
	if dropped {
		e.admit()
	}
}

// startImport turns a request that imports a transfer, just admitted with
// hit locally cached blocks, into one that first reads the rest of the
// imported prefix: it is cached from then on, computes only what follows
// it and prefills nothing until the read ends.
func (e *Engine) startImport(r *request, hit int) {
	if r.req.ImportTokens <= 0 {
		return
	}
	blocks := min(r.req.ImportTokens/BlockSize, maxHitBlocks(len(r.req.Prompt)))
	if blocks <= hit {
		return
	}
	r.imported = (blocks - hit) * BlockSize
	r.cached = blocks * BlockSize
	uncached := len(r.req.Prompt) - r.cached
	r.prefill = max(float64(uncached)/e.cfg.PrefillTokensPerSec+e.cfg.PrefillOverhead.Seconds(), e.cfg.DecodeStep(len(e.running)).Seconds())
	r.fetch = float64(r.imported) / e.cfg.TransferTokensPerSec
	r.phase = phaseFetch
	e.prefilling--
	e.fetching++
	e.stats.TransferredTokens += uint64(r.imported)
}

// fetched ends r's read of imported KV: it prefills what follows.
func (e *Engine) fetched(r *request) {
	r.phase = phasePrefill
	e.fetching--
	e.prefilling++
}

// rates are the progress rates of the running batch between two events:
// prefill work (seconds at the full prefill rate) done per second by each
// prefilling request, and output tokens made per second by each decoding
// one.
func (e *Engine) rates() (prefill, tokens float64) {
	step := e.cfg.DecodeStep(len(e.running)).Seconds()
	if e.prefilling == 0 {
		return 0, 1 / step
	}
	decoding := len(e.running) - e.prefilling - e.fetching
	if e.cfg.PrefillChunkTokens <= 0 || decoding <= 0 {
		return 1 / float64(e.prefilling), 1 / step
	}
	// Each step carries a prefill chunk of up to PrefillChunkTokens: it
	// takes the chunk's compute time longer, and prefill gets that share.
	left := 0.0
	for _, r := range e.running {
		if r.phase == phasePrefill {
			left += max(r.prefill, 0)
		}
	}
	chunk := min(float64(e.cfg.PrefillChunkTokens)/e.cfg.PrefillTokensPerSec, left)
	if chunk <= 0 {
		return 1 / float64(e.prefilling), 1 / step
	}
	full := step + chunk
	return chunk / full / float64(e.prefilling), 1 / full
}

// heldTokens is the tokens held for transfer id, 0 if none.
func (e *Engine) heldTokens(id RequestID) int {
	if h, ok := e.xfer.byID[id]; ok {
		return h.tokens
	}
	return 0
}

// Fetch is Engine.Fetch on the replica's engine at the current virtual
// time: what a decode worker's read of transfer id takes from this
// prefill worker. A crashed replica holds nothing.
func (r *Replica) Fetch(id RequestID) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.crashed {
		return 0, fmt.Errorf("%w: request %d (replica crashed)", ErrUnknownTransfer, id)
	}
	r.advanceLocked()
	n, err := r.eng.Fetch(r.vnow(), id)
	r.signal()
	return n, err
}

// ReleaseTransfer is Engine.Release on the replica's engine: the decode
// leg of transfer id will not come.
func (r *Replica) ReleaseTransfer(id RequestID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.crashed {
		return false
	}
	r.advanceLocked()
	ok := r.eng.Release(r.vnow(), id)
	r.signal()
	return ok
}

// HeldTransfers is the number of transfers the replica's engine holds.
func (r *Replica) HeldTransfers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eng.HeldTransfers()
}
