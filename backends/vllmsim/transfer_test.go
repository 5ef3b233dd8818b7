package vllmsim

import (
	"errors"
	"math"
	"testing"
	"time"
)

func pdEngines(t *testing.T) (prefill, decode *Engine) {
	t.Helper()
	mod := func(c *EngineConfig) {
		c.TransferTokensPerSec = 10_000
		c.TransferTTL = time.Minute
	}
	return newTestEngine(t, mod), newTestEngine(t, mod)
}

// TestTransferPrefillToDecode: the prefill worker computes the prompt and
// holds its full blocks; the decode worker reads them in tokens ÷ rate,
// computes only the last block's tokens, reports the imported prefix as
// cached, and keeps it in its own prefix cache.
func TestTransferPrefillToDecode(t *testing.T) {
	pe, de := pdEngines(t)
	prompt := seqPrompt(0, 1000) // 62 full blocks (992 tokens) and 8 more
	pev := finish(t, pe, t0, Request{Prompt: prompt, MaxTokens: 1, HoldKV: true})
	if pev.HeldTokens != 992 || pe.HeldTransfers() != 1 {
		t.Fatalf("prefill: held %d tokens, %d transfers; want 992, 1", pev.HeldTokens, pe.HeldTransfers())
	}
	if s := pe.Stats(); s.UsedBlocks != 62 {
		t.Fatalf("prefill worker pins %d blocks, want the 62 it holds", s.UsedBlocks)
	}
	at := pe.Now()
	n, err := pe.Fetch(at, pev.ID)
	if err != nil || n != 992 {
		t.Fatalf("fetch: %d, %v", n, err)
	}
	if s := pe.Stats(); s.UsedBlocks != 0 || s.CachedBlocks != 62 {
		t.Fatalf("after the fetch the prefill worker pins %d blocks, caches %d", s.UsedBlocks, s.CachedBlocks)
	}
	if _, err := pe.Fetch(at, pev.ID); !errors.Is(err, ErrUnknownTransfer) {
		t.Fatalf("second fetch: %v, want ErrUnknownTransfer", err)
	}
	dev := finish(t, de, at, Request{Prompt: prompt, MaxTokens: 3, ImportTokens: n})
	if dev.CachedTokens != 992 || dev.Transferred != 992 {
		t.Fatalf("decode: cached %d, transferred %d; want 992 both", dev.CachedTokens, dev.Transferred)
	}
	// Read 992 tokens at 10,000/s, then the last 8 tokens' prefill (shorter
	// than a step, so one step of 11 ms).
	want := 99200*time.Microsecond + 11*time.Millisecond
	if d := dev.TTFT() - want; d < 0 || d > time.Microsecond {
		t.Fatalf("decode TTFT %v, want %v", dev.TTFT(), want)
	}
	if s := de.Stats(); s.TransferredTokens != 992 || s.PrefixCacheHits != 0 {
		t.Fatalf("decode stats: transferred %d, local hits %d", s.TransferredTokens, s.PrefixCacheHits)
	}
	// The next turn hits the decode worker's own cache.
	if got := de.CachedPrefix(Request{Prompt: append(prompt, seqPrompt(5000, 100)...)}); got != 992 {
		t.Fatalf("decode worker caches %d of the imported prefix, want 992", got)
	}
}

// TestTransferPartlyCached: a decode worker that holds part of the prompt
// reads only the rest.
func TestTransferPartlyCached(t *testing.T) {
	pe, de := pdEngines(t)
	prompt := seqPrompt(0, 1000)
	finish(t, de, t0, Request{Prompt: prompt[:320], MaxTokens: 1})
	pev := finish(t, pe, t0, Request{Prompt: prompt, MaxTokens: 1, HoldKV: true})
	n, err := pe.Fetch(pe.Now(), pev.ID)
	if err != nil {
		t.Fatal(err)
	}
	dev := finish(t, de, pe.Now(), Request{Prompt: prompt, MaxTokens: 2, ImportTokens: n})
	if dev.CachedTokens != 992 || dev.Transferred != 992-320 {
		t.Fatalf("cached %d, transferred %d; want 992, %d", dev.CachedTokens, dev.Transferred, 992-320)
	}
}

// TestTransferExpires: KV nobody fetches is released after the TTL, and
// its fetch fails; a released one too.
func TestTransferExpires(t *testing.T) {
	pe, _ := pdEngines(t)
	ev := finish(t, pe, t0, Request{Prompt: seqPrompt(0, 200), MaxTokens: 1, HoldKV: true})
	ev2 := finish(t, pe, pe.Now(), Request{Prompt: seqPrompt(9000, 200), MaxTokens: 1, HoldKV: true})
	if !pe.Release(pe.Now(), ev2.ID) || pe.Release(pe.Now(), ev2.ID) {
		t.Fatal("release: want true once, then false")
	}
	pe.Advance(ev.Time.Add(time.Minute))
	if pe.HeldTransfers() != 0 || pe.Stats().UsedBlocks != 0 {
		t.Fatalf("after the TTL: %d transfers, %d blocks pinned", pe.HeldTransfers(), pe.Stats().UsedBlocks)
	}
	if _, err := pe.Fetch(pe.Now(), ev.ID); !errors.Is(err, ErrUnknownTransfer) {
		t.Fatalf("expired fetch: %v", err)
	}
	if _, err := pe.Fetch(pe.Now(), 12345); !errors.Is(err, ErrUnknownTransfer) {
		t.Fatalf("unknown fetch: %v", err)
	}
}

func TestImportRefused(t *testing.T) {
	e := newTestEngine(t, nil)
	if _, err := e.Submit(t0, Request{Prompt: seqPrompt(0, 100), ImportTokens: 64}); !errors.Is(err, ErrNoTransfer) {
		t.Errorf("import without a connector: %v", err)
	}
	pe, _ := pdEngines(t)
	for _, n := range []int{-1, 101} {
		if _, err := pe.Submit(t0, Request{Prompt: seqPrompt(0, 100), ImportTokens: n}); !errors.Is(err, ErrBadImport) {
			t.Errorf("ImportTokens %d: %v", n, err)
		}
	}
	if _, err := NewEngine(EngineConfig{MaxNumSeqs: 1, CacheBlocks: 1, MaxModelLen: 1, PrefillTokensPerSec: 1, DecodeStepBase: 1, PrefillChunkTokens: -1}); err == nil {
		t.Error("negative PrefillChunkTokens accepted")
	}
}

// TestPrefillInterference: with chunked prefill, a long prompt prefilled
// beside a decoding request lengthens that request's steps by the chunk's
// compute time for as long as the prefill lasts; without it, not at all.
func TestPrefillInterference(t *testing.T) {
	itl := func(chunk int) (time.Duration, time.Duration) {
		e := newTestEngine(t, func(c *EngineConfig) { c.PrefillChunkTokens = chunk })
		dec, _ := e.Submit(t0, Request{Prompt: seqPrompt(0, 16), MaxTokens: 200})
		e.Advance(t0.Add(100 * time.Millisecond)) // decoding by now
		long, _ := e.Submit(e.Now(), Request{Prompt: seqPrompt(5000, 2000), MaxTokens: 2})
		evs := runAll(t, e)
		d := evs[dec]
		last := d[len(d)-1]
		return last.Time.Sub(last.FirstToken), evs[long][0].TTFT()
	}
	plain, plainTTFT := itl(0)
	chunked, chunkedTTFT := itl(256)
	// Without chunking the decode runs beside the prefill at 12 ms a step
	// (two running), then at 11 ms: about 2.35 s for 199 tokens.
	if plain > 2400*time.Millisecond {
		t.Fatalf("no chunking: decode took %v, want about 2.35 s", plain)
	}
	// With it the 2,000-token prefill takes 7.8 steps of 12 + 256 ms (256
	// tokens at 1,000/s), each making one token of the decode; its other
	// 191.2 tokens take 11 ms each (the prefilled request leaves after one
	// more step of 12 ms, a millisecond not counted).
	steps := 2000.0 / 256
	want := steps*0.268 + (199-steps)*0.011
	if math.Abs(chunked.Seconds()-want) > 0.02 {
		t.Fatalf("chunked: decode took %v (%v without), want %.3f s", chunked, plain, want)
	}
	if chunkedTTFT <= plainTTFT {
		t.Fatalf("chunked prefill TTFT %v not above %v (it shares steps with decode)", chunkedTTFT, plainTTFT)
	}
}
