package vllmsim

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

func testEngineConfig() EngineConfig {
	return EngineConfig{
		MaxNumSeqs:          4,
		CacheBlocks:         1024,
		MaxModelLen:         4096,
		PrefillTokensPerSec: 1000,
		DecodeStepBase:      10 * time.Millisecond,
		DecodeStepPerSeq:    time.Millisecond,
	}
}

func newTestEngine(t testing.TB, mod func(*EngineConfig)) *Engine {
	t.Helper()
	cfg := testEngineConfig()
	if mod != nil {
		mod(&cfg)
	}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// seqPrompt returns n distinct tokens starting at base.
func seqPrompt(base, n int) []Token {
	p := make([]Token, n)
	for i := range p {
		p[i] = Token(base + i)
	}
	return p
}

// runAll drives e until idle and returns the events of each request.
func runAll(t testing.TB, e *Engine) map[RequestID][]Event {
	t.Helper()
	evs := map[RequestID][]Event{}
	for _, ev := range e.Advance(e.Now()) {
		evs[ev.ID] = append(evs[ev.ID], ev)
	}
	for i := 0; ; i++ {
		next, ok := e.NextEvent()
		if !ok {
			return evs
		}
		if i > 1_000_000 {
			t.Fatal("engine does not settle")
		}
		for _, ev := range e.Advance(next) {
			evs[ev.ID] = append(evs[ev.ID], ev)
		}
	}
}

// finish submits req at now, runs the engine idle and returns its
// EventFinished.
func finish(t testing.TB, e *Engine, now time.Time, req Request) Event {
	t.Helper()
	id, err := e.Submit(now, req)
	if err != nil {
		t.Fatal(err)
	}
	evs := runAll(t, e)[id]
	if len(evs) == 0 || evs[len(evs)-1].Kind != EventFinished {
		t.Fatalf("request %d: events %+v", id, evs)
	}
	return evs[len(evs)-1]
}

func TestCachedTokensWholeBlocksNeverLastToken(t *testing.T) {
	for _, n := range []int{1, 15, 16, 17, 31, 32, 33, 48, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newTestEngine(t, nil)
			p := seqPrompt(0, n)
			first := finish(t, e, t0, Request{Prompt: p, MaxTokens: 2})
			if first.CachedTokens != 0 {
				t.Fatalf("cold request cached %d", first.CachedTokens)
			}
			second := finish(t, e, e.Now(), Request{Prompt: p, MaxTokens: 2})
			want := (n - 1) / BlockSize * BlockSize
			if second.CachedTokens != want {
				t.Fatalf("prompt %d: cached %d, want %d", n, second.CachedTokens, want)
			}
			// A longer prompt sharing the first n tokens reuses their full blocks.
			third := finish(t, e, e.Now(), Request{Prompt: append(append([]Token{}, p...), seqPrompt(10_000, 40)...), MaxTokens: 2})
			if want := n / BlockSize * BlockSize; third.CachedTokens != want {
				t.Fatalf("extended prompt: cached %d, want %d", third.CachedTokens, want)
			}
		})
	}
}

func TestDivergingPrefixStopsAtFirstDifferentBlock(t *testing.T) {
	e := newTestEngine(t, nil)
	a := seqPrompt(0, 64)
	b := append(seqPrompt(0, 40), seqPrompt(500, 24)...) // differs inside block 2
	finish(t, e, t0, Request{Prompt: a, MaxTokens: 1})
	ev := finish(t, e, e.Now(), Request{Prompt: b, MaxTokens: 1})
	if ev.CachedTokens != 32 {
		t.Fatalf("cached %d, want 32", ev.CachedTokens)
	}
}

func TestSaltAndAdapterIsolate(t *testing.T) {
	p := seqPrompt(0, 65)
	cases := []struct {
		name       string
		a, b       Request
		wantCached int
	}{
		{"same", Request{Prompt: p}, Request{Prompt: p}, 64},
		{"salt", Request{Prompt: p, CacheSalt: "x"}, Request{Prompt: p, CacheSalt: "y"}, 0},
		{"salt-vs-none", Request{Prompt: p, CacheSalt: "x"}, Request{Prompt: p}, 0},
		{"same-salt", Request{Prompt: p, CacheSalt: "x"}, Request{Prompt: p, CacheSalt: "x"}, 64},
		{"adapter", Request{Prompt: p, Adapter: "a"}, Request{Prompt: p, Adapter: "b"}, 0},
		{"adapter-vs-base", Request{Prompt: p, Adapter: "a"}, Request{Prompt: p}, 0},
		{"same-adapter", Request{Prompt: p, Adapter: "a"}, Request{Prompt: p, Adapter: "a"}, 64},
		{"key-boundary", Request{Prompt: p, Adapter: "a", CacheSalt: ""}, Request{Prompt: p, Adapter: "", CacheSalt: "a"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEngine(t, nil)
			finish(t, e, t0, c.a)
			if got := finish(t, e, e.Now(), c.b).CachedTokens; got != c.wantCached {
				t.Fatalf("cached %d, want %d", got, c.wantCached)
			}
		})
	}
}

func TestLRUEviction(t *testing.T) {
	// 8 blocks of capacity; each request holds 4 (3 full prompt blocks +
	// 1 partial/output block) while running and leaves 3 cached.
	e := newTestEngine(t, func(c *EngineConfig) { c.CacheBlocks = 8 })
	A, B, C := seqPrompt(0, 49), seqPrompt(1000, 49), seqPrompt(2000, 49)
	finish(t, e, t0, Request{Prompt: A, MaxTokens: 1})
	finish(t, e, e.Now(), Request{Prompt: B, MaxTokens: 1})
	// Touch A so that B is least recently used.
	if got := finish(t, e, e.Now(), Request{Prompt: A, MaxTokens: 1}).CachedTokens; got != 48 {
		t.Fatalf("A again: cached %d", got)
	}
	// C needs 4 blocks; 2 are free, so 2 cached blocks are evicted: B's
	// tail first.
	finish(t, e, e.Now(), Request{Prompt: C, MaxTokens: 1})
	if got := e.CachedPrefix(Request{Prompt: A}); got != 48 {
		t.Fatalf("A evicted: cached prefix %d", got)
	}
	if got := e.CachedPrefix(Request{Prompt: B}); got != 16 {
		t.Fatalf("B: cached prefix %d, want 16 (tail evicted first)", got)
	}
	if s := e.Stats(); s.Evictions != 2 || s.UsedBlocks != 0 || s.CachedBlocks != 7 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRunningBlocksNotEvicted(t *testing.T) {
	e := newTestEngine(t, func(c *EngineConfig) { c.CacheBlocks = 8 })
	A, B := seqPrompt(0, 64), seqPrompt(1000, 64)
	// A holds 5 blocks (4 prompt + 1 output) for a long decode.
	idA, _ := e.Submit(t0, Request{Prompt: A, MaxTokens: 16})
	// B needs 5 blocks too but only 3 are free and none evictable: it waits.
	idB, _ := e.Submit(t0, Request{Prompt: B, MaxTokens: 1})
	if s := e.Stats(); s.Running != 1 || s.Waiting != 1 || s.UsedBlocks != 5 {
		t.Fatalf("stats %+v", s)
	}
	A65 := append(append([]Token{}, A...), 9999)
	if got := e.CachedPrefix(Request{Prompt: A65}); got != 64 {
		t.Fatalf("A's blocks not registered: %d", got)
	}
	evs := runAll(t, e)
	if evs[idA][1].Time.After(evs[idB][0].Admitted) {
		t.Fatalf("B admitted at %v before A finished at %v", evs[idB][0].Admitted, evs[idA][1].Time)
	}
	// Now B ran by evicting A's cached blocks.
	if got := e.CachedPrefix(Request{Prompt: A65}); got >= 64 {
		t.Fatalf("A still fully cached: %d", got)
	}
}

func TestTTFTGrowsWithUncachedTokens(t *testing.T) {
	var prev time.Duration
	for _, n := range []int{100, 500, 1000, 2000} {
		e := newTestEngine(t, nil)
		ev := finish(t, e, t0, Request{Prompt: seqPrompt(0, n), MaxTokens: 1})
		want := time.Duration(float64(n) / 1000 * float64(time.Second))
		if d := ev.TTFT() - want; d < 0 || d > time.Microsecond {
			t.Fatalf("n=%d: TTFT %v, want %v", n, ev.TTFT(), want)
		}
		if ev.TTFT() <= prev {
			t.Fatalf("TTFT did not grow: %v after %v", ev.TTFT(), prev)
		}
		prev = ev.TTFT()
	}
	// Tiny prompts take at least one step.
	e := newTestEngine(t, nil)
	if ev := finish(t, e, t0, Request{Prompt: seqPrompt(0, 3), MaxTokens: 1}); ev.TTFT() < 11*time.Millisecond {
		t.Fatalf("tiny prompt TTFT %v < one step", ev.TTFT())
	}
}

func TestCachedRequestFaster(t *testing.T) {
	e := newTestEngine(t, nil)
	p := seqPrompt(0, 2001)
	cold := finish(t, e, t0, Request{Prompt: p, MaxTokens: 8})
	warm := finish(t, e, e.Now(), Request{Prompt: p, MaxTokens: 8})
	if warm.CachedTokens != 2000 || warm.TTFT() >= cold.TTFT()/10 {
		t.Fatalf("cold %v, warm %v (cached %d)", cold.TTFT(), warm.TTFT(), warm.CachedTokens)
	}
	if s := e.Stats(); s.PrefixCacheQueries != 4002 || s.PrefixCacheHits != 2000 || s.TTFT.Count != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// PrefillOverhead is paid by every request, a full cache hit too, on top of
// its uncached tokens; it stays out of the decode steps.
func TestPrefillOverhead(t *testing.T) {
	const overhead = 60 * time.Millisecond
	p := seqPrompt(0, 2001)
	plain := newTestEngine(t, nil)
	cold := finish(t, plain, t0, Request{Prompt: p, MaxTokens: 4})
	warm := finish(t, plain, plain.Now(), Request{Prompt: p, MaxTokens: 4})
	slow := newTestEngine(t, func(c *EngineConfig) { c.PrefillOverhead = overhead })
	coldO := finish(t, slow, t0, Request{Prompt: p, MaxTokens: 4})
	warmO := finish(t, slow, slow.Now(), Request{Prompt: p, MaxTokens: 4})
	// Uncached tokens at 1,000 a second plus the overhead; without it the
	// warm request's one token would take the one-step floor (11 ms).
	for _, c := range []struct {
		name       string
		with, base Event
	}{{"cold", coldO, cold}, {"warm", warmO, warm}} {
		want := time.Duration(len(p)-c.with.CachedTokens)*time.Millisecond + overhead
		if d := c.with.TTFT() - want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s: TTFT %v with the overhead (%v without), want %v", c.name, c.with.TTFT(), c.base.TTFT(), want)
		}
		if c.with.CachedTokens != c.base.CachedTokens {
			t.Errorf("%s: cached %d with the overhead, %d without", c.name, c.with.CachedTokens, c.base.CachedTokens)
		}
		if dec, decBase := c.with.Time.Sub(c.with.FirstToken), c.base.Time.Sub(c.base.FirstToken); dec != decBase {
			t.Errorf("%s: decode took %v with the overhead, %v without", c.name, dec, decBase)
		}
	}
	if _, err := NewEngine(EngineConfig{MaxNumSeqs: 1, CacheBlocks: 1, MaxModelLen: 1, PrefillTokensPerSec: 1, DecodeStepBase: 1, PrefillOverhead: -1}); err == nil {
		t.Error("a negative PrefillOverhead was accepted")
	}
}

func TestDecodeTiming(t *testing.T) {
	e := newTestEngine(t, nil)
	ev := finish(t, e, t0, Request{Prompt: seqPrompt(0, 10), MaxTokens: 11})
	// 10 decode steps after the first token, batch 1: 11ms each.
	if got := ev.Time.Sub(ev.FirstToken); got < 110*time.Millisecond || got > 110*time.Millisecond+time.Microsecond {
		t.Fatalf("decode took %v, want 110ms", got)
	}
	// Batch of 4: each step 14ms.
	e = newTestEngine(t, nil)
	var ids []RequestID
	for i := range 4 {
		id, _ := e.Submit(t0, Request{Prompt: seqPrompt(i*100, 10), MaxTokens: 11})
		ids = append(ids, id)
	}
	// Batch of 4: each step takes 14ms while all four run, less once some
	// have finished.
	evs := runAll(t, e)
	for _, id := range ids {
		f := evs[id][1]
		if got := f.Time.Sub(f.FirstToken); got <= 120*time.Millisecond || got > 140*time.Millisecond+time.Microsecond {
			t.Fatalf("batched decode took %v, want within (120ms, 140ms]", got)
		}
	}
}

func TestQueueingBeyondMaxNumSeqs(t *testing.T) {
	e := newTestEngine(t, nil) // MaxNumSeqs 4
	var ids []RequestID
	for i := range 10 {
		id, err := e.Submit(t0, Request{Prompt: seqPrompt(i*1000, 100), MaxTokens: 20})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if s := e.Stats(); s.Running != 4 || s.Waiting != 6 {
		t.Fatalf("running %d waiting %d", s.Running, s.Waiting)
	}
	evs := runAll(t, e)
	var prevTTFT, maxRunning time.Duration
	for i, id := range ids {
		first := evs[id][0]
		if i < 4 && !first.Admitted.Equal(t0) || i >= 4 && !first.Admitted.After(t0) {
			t.Fatalf("request %d admitted at %v", i, first.Admitted.Sub(t0))
		}
		if i < 4 {
			maxRunning = max(maxRunning, first.TTFT())
		} else if first.TTFT() < prevTTFT || first.TTFT() <= maxRunning {
			t.Fatalf("queued request %d TTFT %v, previous %v, first batch %v", i, first.TTFT(), prevTTFT, maxRunning)
		}
		prevTTFT = first.TTFT()
	}
	if s := e.Stats(); s.Running != 0 || s.Waiting != 0 || s.RequestsFinished != 10 || s.UsedBlocks != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCancel(t *testing.T) {
	e := newTestEngine(t, func(c *EngineConfig) { c.MaxNumSeqs = 1 })
	a, _ := e.Submit(t0, Request{Prompt: seqPrompt(0, 100), MaxTokens: 100})
	b, _ := e.Submit(t0, Request{Prompt: seqPrompt(1000, 100), MaxTokens: 100})
	if !e.Cancel(t0.Add(time.Millisecond), b) || !e.Cancel(t0.Add(2*time.Millisecond), a) {
		t.Fatal("cancel failed")
	}
	if e.Cancel(t0.Add(2*time.Millisecond), a) {
		t.Fatal("double cancel")
	}
	if s := e.Stats(); s.Running != 0 || s.Waiting != 0 || s.UsedBlocks != 0 || s.RequestsAborted != 2 {
		t.Fatalf("stats %+v", s)
	}
	if _, ok := e.NextEvent(); ok {
		t.Fatal("idle engine has events")
	}
}

func TestSubmitErrors(t *testing.T) {
	e := newTestEngine(t, func(c *EngineConfig) { c.CacheBlocks = 64 })
	if _, err := e.Submit(t0, Request{}); err != ErrEmptyPrompt {
		t.Fatal(err)
	}
	if _, err := e.Submit(t0, Request{Prompt: seqPrompt(0, 4000), MaxTokens: 100}); err != ErrTooLong {
		t.Fatal(err)
	}
	if _, err := e.Submit(t0, Request{Prompt: seqPrompt(0, 2000), MaxTokens: 100}); err != ErrNoCapacity {
		t.Fatal(err)
	}
}

func TestTokenize(t *testing.T) {
	toks := Tokenize("Hello, world! Tokenization<|eot_id|>\n  x")
	// "Hell" "o" "," " wor" "ld" "!" " Tok" "eniz" "atio" "n" "<|eot_id|>" "\n" " " " x"
	if len(toks) != 14 {
		t.Fatalf("got %d tokens", len(toks))
	}
	if Tokenize("abc")[0] != tokenID("abc") {
		t.Fatal("id is not xxh3 of bytes")
	}
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 50)
	a, b := Tokenize(long+"first"), Tokenize(long+"second")
	if len(a) < 100 || fmt.Sprint(a[:len(a)-2]) != fmt.Sprint(b[:len(a)-2]) {
		t.Fatal("shared text prefix does not share tokens")
	}
}
