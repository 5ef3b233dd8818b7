package vllmsim

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// admissionOrder submits reqs at t0 into an engine with one batch slot and
// returns the submission indexes in the order they got their first token.
func admissionOrder(t *testing.T, policy string, reqs []Request) []int {
	t.Helper()
	e := newTestEngine(t, func(c *EngineConfig) { c.MaxNumSeqs = 1; c.SchedulingPolicy = policy })
	idx := map[RequestID]int{}
	for i, r := range reqs {
		id, err := e.Submit(t0, r)
		if err != nil {
			t.Fatal(err)
		}
		idx[id] = i
	}
	type first struct {
		at time.Time
		i  int
	}
	var order []int
	evs := runAll(t, e)
	var firsts []first
	for id, es := range evs {
		for _, ev := range es {
			if ev.Kind == EventFirstToken {
				firsts = append(firsts, first{ev.FirstToken, idx[id]})
			}
		}
	}
	for len(firsts) > 0 {
		b := 0
		for k, f := range firsts {
			if f.at.Before(firsts[b].at) {
				b = k
			}
		}
		order = append(order, firsts[b].i)
		firsts = append(firsts[:b], firsts[b+1:]...)
	}
	return order
}

func TestPriorityOrdersWaitingRequests(t *testing.T) {
	prios := []int{0, 5, -3, 5, 0, -3}
	var reqs []Request
	for i, p := range prios {
		reqs = append(reqs, Request{Prompt: seqPrompt(1000*(i+1), 64), MaxTokens: 4, Priority: p})
	}
	// The first request takes the only slot at once; request 2 preempts it
	// in prefill. Then -3 before 0 before 5, arrival order among equals.
	got := fmt.Sprint(admissionOrder(t, SchedulingPriority, reqs))
	if want := "[2 5 0 4 1 3]"; got != want {
		t.Errorf("priority order %s, want %s", got, want)
	}
	got = fmt.Sprint(admissionOrder(t, SchedulingFCFS, reqs))
	if want := "[0 1 2 3 4 5]"; got != want {
		t.Errorf("fcfs order %s, want %s", got, want)
	}
	got = fmt.Sprint(admissionOrder(t, "", reqs))
	if want := "[0 1 2 3 4 5]"; got != want {
		t.Errorf("default order %s, want %s", got, want)
	}
}

func TestPriorityPreemptsLowerPriority(t *testing.T) {
	e := newTestEngine(t, func(c *EngineConfig) { c.MaxNumSeqs = 2; c.SchedulingPolicy = SchedulingPriority })
	low1, _ := e.Submit(t0, Request{Prompt: seqPrompt(1, 160), MaxTokens: 200, Priority: 1})
	low2, _ := e.Submit(t0, Request{Prompt: seqPrompt(5000, 160), MaxTokens: 200, Priority: 1})
	// Both are decoding after 0.5 s.
	mid := t0.Add(500 * time.Millisecond)
	evs := map[RequestID][]Event{}
	for _, ev := range e.Advance(mid) {
		evs[ev.ID] = append(evs[ev.ID], ev)
	}
	genBefore, _ := e.Generated(low2)
	if genBefore == 0 {
		t.Fatalf("low-priority request generated nothing by %v", mid.Sub(t0))
	}
	high, err := e.Submit(mid, Request{Prompt: seqPrompt(9000, 64), MaxTokens: 4, Priority: 0})
	if err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if st.Preemptions != 1 || st.Running != 2 || st.Waiting != 1 {
		t.Fatalf("after a higher-priority arrival: preemptions %d, running %d, waiting %d; want 1, 2, 1", st.Preemptions, st.Running, st.Waiting)
	}
	for id, es := range runAll(t, e) {
		evs[id] = append(evs[id], es...)
	}
	last := func(id RequestID) Event { return evs[id][len(evs[id])-1] }
	// The later of the two equal low-priority requests was the victim: it
	// finishes after the high one, and after the other low one.
	if !last(high).Time.Before(last(low2).Time) || !last(low1).Time.Before(last(low2).Time) {
		t.Errorf("finish times: high %v, low1 %v, low2 %v", last(high).Time.Sub(t0), last(low1).Time.Sub(t0), last(low2).Time.Sub(t0))
	}
	if ttft := evs[high][0].TTFT(); ttft > 100*time.Millisecond {
		t.Errorf("high-priority TTFT %v behind a full batch of lower priority", ttft)
	}
	firsts := 0
	for _, ev := range evs[low2] {
		if ev.Kind == EventFirstToken {
			firsts++
		}
	}
	if fin := last(low2); firsts != 1 || fin.Kind != EventFinished || fin.OutputTokens != 200 {
		t.Errorf("preempted request: %d first tokens, last event %+v", firsts, fin)
	}
	// Recomputation: it was out of the batch for the high request's run
	// and then prefilled its prompt (cached) and generated tokens again.
	if got := e.Stats(); got.Running != 0 || got.Waiting != 0 || got.UsedBlocks != 0 {
		t.Errorf("engine not drained: %+v", got)
	}
}

func TestPriorityDoesNotPreemptEqualOrHigher(t *testing.T) {
	e := newTestEngine(t, func(c *EngineConfig) { c.MaxNumSeqs = 1; c.SchedulingPolicy = SchedulingPriority })
	if _, err := e.Submit(t0, Request{Prompt: seqPrompt(1, 64), MaxTokens: 100, Priority: 0}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{0, 3} {
		if _, err := e.Submit(t0.Add(time.Millisecond), Request{Prompt: seqPrompt(100*(p+2), 64), MaxTokens: 4, Priority: p}); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.Stats(); st.Preemptions != 0 || st.Waiting != 2 {
		t.Errorf("preemptions %d, waiting %d; want 0, 2", st.Preemptions, st.Waiting)
	}
	// FCFS never preempts.
	f := newTestEngine(t, func(c *EngineConfig) { c.MaxNumSeqs = 1 })
	f.Submit(t0, Request{Prompt: seqPrompt(1, 64), MaxTokens: 100, Priority: 5})
	f.Submit(t0, Request{Prompt: seqPrompt(900, 64), MaxTokens: 4, Priority: -5})
	if st := f.Stats(); st.Preemptions != 0 || st.Waiting != 1 {
		t.Errorf("fcfs: preemptions %d, waiting %d; want 0, 1", st.Preemptions, st.Waiting)
	}
}

func TestPriorityPreemptsForBlocks(t *testing.T) {
	// The batch has room but the KV cache does not: a higher-priority
	// request that needs the blocks preempts; one that could not fit even
	// then waits without preempting.
	e := newTestEngine(t, func(c *EngineConfig) { c.CacheBlocks = 40; c.SchedulingPolicy = SchedulingPriority })
	if _, err := e.Submit(t0, Request{Prompt: seqPrompt(1, 320), MaxTokens: 200, Priority: 2}); err != nil { // 33 blocks
		t.Fatal(err)
	}
	if _, err := e.Submit(t0, Request{Prompt: seqPrompt(7000, 160), MaxTokens: 32, Priority: 0}); err != nil { // 12 blocks
		t.Fatal(err)
	}
	if st := e.Stats(); st.Preemptions != 1 || st.Running != 1 || st.Waiting != 1 {
		t.Fatalf("preemptions %d, running %d, waiting %d; want 1, 1, 1", st.Preemptions, st.Running, st.Waiting)
	}
	runAll(t, e)
	if st := e.Stats(); st.RequestsFinished != 2 || st.Preemptions != 1 {
		t.Errorf("finished %d, preemptions %d", st.RequestsFinished, st.Preemptions)
	}
}

func TestSchedulingPolicyValidated(t *testing.T) {
	cfg := testEngineConfig()
	cfg.SchedulingPolicy = "lifo"
	if _, err := NewEngine(cfg); err == nil || !strings.Contains(err.Error(), `"lifo"`) {
		t.Errorf("bad policy: %v", err)
	}
}

func TestHTTPPriorityField(t *testing.T) {
	cfg := fastConfig()
	f := startFleet(t, 1, cfg)
	u := f.URLs()[0]
	resp, b := post(t, u+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"priority":3}`)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "Priority scheduling is not enabled") {
		t.Errorf("fcfs replica, priority 3: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, u+"/v1/completions", `{"prompt":"hi","priority":0,"max_tokens":2}`)
	if resp.StatusCode != 200 {
		t.Errorf("fcfs replica, priority 0: %d %s", resp.StatusCode, b)
	}
	cfg.Engine.SchedulingPolicy = SchedulingPriority
	p := startFleet(t, 1, cfg)
	pu := p.URLs()[0]
	for _, body := range []string{`"high"`, `1.5`, `[1]`} {
		resp, b = post(t, pu+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"priority":`+body+`}`)
		if resp.StatusCode != 400 || !strings.Contains(string(b), "priority") {
			t.Errorf("priority %s: %d %s", body, resp.StatusCode, b)
		}
	}
	resp, b = post(t, pu+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"priority":-7,"max_tokens":2}`)
	if resp.StatusCode != 200 {
		t.Errorf("priority replica, priority -7: %d %s", resp.StatusCode, b)
	}
}

func TestHTTPPriorityPreempts(t *testing.T) {
	// One batch slot, real time: a long low-priority completion holds it;
	// a high-priority one preempts it and finishes first.
	cfg := fastConfig()
	cfg.Speed = 1
	cfg.Engine.MaxNumSeqs = 1
	cfg.Engine.SchedulingPolicy = SchedulingPriority
	f := startFleet(t, 1, cfg)
	u := f.URLs()[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lowDone := make(chan struct{})
	go func() {
		defer close(lowDone)
		req, _ := http.NewRequestWithContext(ctx, "POST", u+"/v1/completions", strings.NewReader(`{"prompt":"long","max_tokens":8000,"priority":9}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return f.Replicas()[0].Stats().Running == 1 })
	resp, b := post(t, u+"/v1/completions", `{"prompt":"short","max_tokens":2,"priority":1}`)
	if resp.StatusCode != 200 {
		t.Fatalf("high-priority request: %d %s", resp.StatusCode, b)
	}
	select {
	case <-lowDone:
		t.Fatal("the low-priority request ended before the high-priority one was answered")
	default:
	}
	if s := f.Replicas()[0].Stats(); s.Preemptions != 1 {
		t.Errorf("preemptions %d, want 1", s.Preemptions)
	}
	cancel()
	<-lowDone
}
