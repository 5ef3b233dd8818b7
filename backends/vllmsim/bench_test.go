package vllmsim

import (
	"testing"
	"time"
)

// BenchmarkEngine submits requests with shared system prompts at a steady
// arrival rate and advances the engine event by event, as a discrete-event
// fleet simulator would. It reports requests and events per second of real
// time.
func BenchmarkEngine(b *testing.B) {
	p, _ := LookupPreset("llama-3.1-8b-h100")
	const systems, promptLen, outLen = 16, 1024, 128
	prompts := make([][]Token, 256)
	for i := range prompts {
		sys := seqPrompt((i%systems)*100_000, 768)
		prompts[i] = append(sys, seqPrompt(1_000_000+i*1000, promptLen-768)...)
	}
	e, err := NewEngine(p.Engine)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(0, 0)
	gap := 2 * time.Millisecond // 500 requests/s
	events := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		arrival := now.Add(gap)
		for {
			t, ok := e.NextEvent()
			if !ok || t.After(arrival) {
				break
			}
			events += len(e.Advance(t))
		}
		now = arrival
		if _, err := e.Submit(now, Request{Prompt: prompts[i%len(prompts)], MaxTokens: outLen}); err != nil {
			b.Fatal(err)
		}
	}
	for {
		t, ok := e.NextEvent()
		if !ok {
			break
		}
		events += len(e.Advance(t))
	}
	b.StopTimer()
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "requests/s")
	b.ReportMetric(float64(events)/sec, "events/s")
}
