package epp

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/route"
)

// gatedFleet is the test fleet with flow control, as serve's fleet has.
type gatedFleet struct {
	*testFleet
	gate *flowgate.Gate
}

func (f gatedFleet) FlowGate() *flowgate.Gate { return f.gate }

func newGatedHarness(t *testing.T, cfg flowgate.Config) (*harness, *flowgate.Gate) {
	t.Helper()
	var g *flowgate.Gate
	h := newHarness(t, route.Config{DefaultThreshold: 1}, pipeline.Config{}, func(f *testFleet) Fleet {
		var err error
		g, err = flowgate.New(cfg, f.Router(), nil, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return gatedFleet{f, g}
	})
	return h, g
}

type answer struct {
	s extprocv3.ExternalProcessor_ProcessClient
	r *extprocv3.ProcessingResponse
}

// send starts a buffered exchange whose answer may wait.
func (h *harness) sendAsync(t *testing.T, user string, extra ...string) chan answer {
	out := make(chan answer, 1)
	go func() {
		s, r := h.buffered(t, chatBody("flow", user), nil, extra...)
		out <- answer{s, r}
	}()
	return out
}

// waitQueued waits until the gate explains n requests queued.
func waitQueued(t *testing.T, g *flowgate.Gate, n int) {
	t.Helper()
	for i := 0; ; i++ {
		if ex := g.Explain(flowgate.Identity{}, route.Request{}); ex.Queued == n {
			return
		}
		if i == 1000 {
			t.Fatalf("never %d queued", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func release(a answer) {
	a.s.CloseSend()
	_, _ = a.s.Recv()
}

// Through ext_proc: while every endpoint is full, a request waits holding
// its stream; a higher objective is dispatched before a lower one queued
// earlier; a sheddable one gets an immediate 429 with Retry-After; a
// stream that goes away leaves the queue.
func TestFlowControlThroughExtProc(t *testing.T) {
	h, g := newGatedHarness(t, flowgate.Config{Objectives: map[string]string{"interactive": "10", "batch": "-1"}})
	var held []answer
	for i := range 3 {
		a := <-h.sendAsync(t, "hold "+strconv.Itoa(i))
		if a.r.GetRequestBody() == nil {
			t.Fatalf("request %d below saturation: %v", i, a.r)
		}
		held = append(held, a)
	}
	low := h.sendAsync(t, "low", "x-gateway-inference-fairness-id", "flood")
	waitQueued(t, g, 1)
	ctx, cancel := context.WithCancel(context.Background())
	gone, err := h.client.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sendBuffered(t, gone, chatBody("flow", "leaves"))
	waitQueued(t, g, 2)
	cancel()
	waitQueued(t, g, 1)
	high := h.sendAsync(t, "high", "x-llm-d-inference-fairness-id", "flood", "x-llm-d-inference-objective", "interactive")
	waitQueued(t, g, 2)
	shed := <-h.sendAsync(t, "bulk", "x-gateway-inference-objective", "batch")
	ir := shed.r.GetImmediateResponse()
	if ra, ok := headerValue(ir.GetHeaders(), "retry-after"); ir.GetStatus().GetCode() != 429 || !ok || ra == "" {
		t.Fatalf("sheddable while saturated: %v", shed.r)
	}
	release(held[0])
	first := <-high
	if first.r.GetRequestBody() == nil {
		t.Fatalf("the interactive request: %v", first.r)
	}
	select {
	case a := <-low:
		t.Fatalf("the lower band was dispatched with only one endpoint free: %v", a.r)
	case <-time.After(20 * time.Millisecond):
	}
	release(held[1])
	if a := <-low; a.r.GetRequestBody() == nil {
		t.Fatalf("the queued request: %v", a.r)
	} else {
		release(a)
	}
	release(first)
	release(held[2])
	waitInFlight(t, h, 0)
}

func sendBuffered(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, body []byte) {
	t.Helper()
	if err := s.Send(&extprocv3.ProcessingRequest{ProtocolConfig: protocol(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE),
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs("/v1/chat/completions")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}); err != nil {
		t.Fatal(err)
	}
}

func TestOutputTokensFromTheAnswer(t *testing.T) {
	plain := []byte(`{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12}}`)
	sse := []byte("data: {\"choices\":[]}\n\ndata: {\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n")
	for _, tc := range []struct {
		tail       []byte
		sse, whole bool
		want       int
	}{
		{plain, false, true, 12},
		{plain, false, false, 0}, // only a tail: not read
		{sse, true, false, 7},
		{[]byte(`{"choices":[]}`), false, true, 0},
	} {
		if got := outputTokens(tc.tail, tc.sse, tc.whole); got != tc.want {
			t.Errorf("outputTokens(%q) = %d; want %d", tc.tail, got, tc.want)
		}
	}
}

// textEvents counts the data events with text, and nothing else: not an
// empty delta, a usage event, [DONE], a comment, or a line the piece cut.
func TestTextEvents(t *testing.T) {
	chunk := "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		": keep-alive\n\n" +
		"data: {\"choices\":[{\"text\":\"lo\"}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"completion_tokens\":9}}\n\n" +
		"data: [DONE]\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"cut"
	if got := textEvents([]byte(chunk)); got != 2 {
		t.Fatalf("textEvents = %d, want 2", got)
	}
}
