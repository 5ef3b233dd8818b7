package vllmsim

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// randomRun drives an engine with a random mix of shared-prefix requests and
// cancellations, checking the block accounting after every step, and returns
// every event.
func randomRun(t *testing.T, seed uint64) []Event {
	rng := rand.New(rand.NewPCG(seed, 1))
	e := newTestEngine(t, func(c *EngineConfig) { c.CacheBlocks = 96; c.MaxNumSeqs = 6 })
	now := t0
	var all []Event
	var live []RequestID
	check := func() {
		s := e.Stats()
		if s.UsedBlocks < 0 || s.CachedBlocks < 0 || s.UsedBlocks+s.CachedBlocks > 96 || s.Running > 6 || s.Waiting < 0 {
			t.Fatalf("seed %d: bad stats %+v", seed, s)
		}
		if s.Running == 0 && s.UsedBlocks != 0 {
			t.Fatalf("seed %d: idle engine holds %d blocks", seed, s.UsedBlocks)
		}
		if s.PrefixCacheHits > s.PrefixCacheQueries {
			t.Fatalf("seed %d: hits above queries", seed)
		}
	}
	for range 400 {
		now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
		all = append(all, e.Advance(now)...)
		switch rng.IntN(10) {
		case 0:
			if len(live) > 0 {
				e.Cancel(now, live[rng.IntN(len(live))])
			}
		default:
			p := append(seqPrompt(rng.IntN(4)*10_000, 16*rng.IntN(20)), seqPrompt(rng.IntN(1_000_000), 1+rng.IntN(40))...)
			id, err := e.Submit(now, Request{Prompt: p, MaxTokens: 1 + rng.IntN(30), CacheSalt: []string{"", "s"}[rng.IntN(2)]})
			if err == nil {
				live = append(live, id)
			}
		}
		check()
	}
	for {
		next, ok := e.NextEvent()
		if !ok {
			break
		}
		all = append(all, e.Advance(next)...)
		check()
	}
	for _, ev := range all {
		if ev.CachedTokens%BlockSize != 0 || ev.CachedTokens >= ev.PromptTokens {
			t.Fatalf("seed %d: event %+v", seed, ev)
		}
	}
	return all
}

func TestRandomRunsKeepInvariantsAndAreDeterministic(t *testing.T) {
	for seed := range uint64(20) {
		a := randomRun(t, seed)
		b := randomRun(t, seed)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
	}
}
