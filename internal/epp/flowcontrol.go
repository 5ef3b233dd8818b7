package epp

import (
	"bytes"
	"context"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/route"
)

// flowFleet is implemented by a Fleet with flow control (the HTTP server):
// the picker then queues requests while the fleet is saturated, holding
// each one's stream until it is dispatched or refused.
type flowFleet interface{ FlowGate() *flowgate.Gate }

// gate is the fleet's flow control, nil when it has none.
func (p *Picker) gate() *flowgate.Gate {
	if ff, ok := p.fleet.(flowFleet); ok {
		return ff.FlowGate()
	}
	return nil
}

// lowerHeaders are the gateway's request headers (lower-case names) as
// flow identification reads them.
type lowerHeaders map[string]string

func (h lowerHeaders) Get(name string) string { return h[strings.ToLower(name)] }

// identify finds the request's flow from the same headers serve reads
// (the tenant, the fairness and objective headers, the group).
func (x *exchange) identify(group string) error {
	g := x.p.gate()
	if !g.Enabled() {
		return nil
	}
	tenant, err := x.p.pipe.Authenticate(x.headers["authorization"])
	if err != nil {
		return err
	}
	x.flow, err = g.Identify(lowerHeaders(x.headers), tenant, group)
	x.flowOn = err == nil
	return err
}

// acquire picks through flow control: a saturated fleet holds the request
// (and its stream) in the queue; a refusal is a 429 with Retry-After.
func (x *exchange) acquire(ctx context.Context) (route.Decision, error) {
	d, _, err := x.p.gate().Acquire(ctx, x.flow.Flow, x.req, len(x.body))
	if err != nil {
		return d, x.p.pipe.PickError(err, x.req.Model)
	}
	return d, nil
}

// chargeFlow counts the answer's output tokens to the request's flow.
func (x *exchange) chargeFlow() {
	if !x.flowOn {
		return
	}
	n := outputTokens(x.tail, x.sse, x.respSize == len(x.tail))
	if n == 0 {
		n = x.textEvents
	}
	if n > 0 {
		x.p.gate().Charge(x.req.Model, x.flow.Flow, 0, n)
	}
}

// textEvents counts the lines of a server-sent event stream's piece that
// are data events whose text ("content" or "text") is not empty: one
// streamed token each, as vLLM and SGLang send them. A line cut by the
// piece's end is not counted.
func textEvents(chunk []byte) int {
	n := 0
	for line := range bytes.Lines(chunk) {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok || !bytes.HasSuffix(line, []byte("\n")) {
			continue
		}
		r := gjson.GetManyBytes(data, "choices.0.delta.content", "choices.0.text")
		if r[0].String() != "" || r[1].String() != "" {
			n++
		}
	}
	return n
}

// outputTokens reads usage.completion_tokens from the end of a response
// body, as usage reads the prompt's; 0 when it does not say.
func outputTokens(tail []byte, sse, whole bool) int {
	read := func(u gjson.Result) int {
		if n := u.Get("completion_tokens"); n.Type == gjson.Number && n.Num > 0 && n.Num < 1<<40 {
			return int(n.Num)
		}
		return 0
	}
	if !sse {
		if whole && gjson.ValidBytes(tail) {
			return read(gjson.GetBytes(tail, "usage"))
		}
		return 0
	}
	lines := bytes.Split(tail, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(lines[i]), []byte("data:")); ok {
			if u := gjson.GetBytes(bytes.TrimSpace(data), "usage"); u.IsObject() {
				return read(u)
			}
		}
	}
	return 0
}
