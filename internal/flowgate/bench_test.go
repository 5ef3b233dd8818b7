package flowgate

import (
	"context"
	"strconv"
	"testing"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/route"
)

// benchRouter is eight members far below their thresholds.
func benchRouter(b *testing.B) *route.Router {
	members := make([]route.Member, 8)
	for i := range members {
		members[i] = route.Member{Name: "m" + strconv.Itoa(i)}
	}
	rt, err := route.New(route.Config{Policy: "consistent-hash"}, members)
	if err != nil {
		b.Fatal(err)
	}
	return rt
}

// BenchmarkPickDirect is the pick without flow control: the router's
// TryPick and Done.
func BenchmarkPickDirect(b *testing.B) {
	rt := benchRouter(b)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for i := range b.N {
		d, err := rt.TryPick(route.Request{Key: uint64(i) * 0x9e3779b97f4a7c15, Model: "m", PromptTokens: 500})
		if err != nil {
			b.Fatal(err)
		}
		d.Done()
	}
}

// BenchmarkPickGated is the same pick through the gate when the fleet is
// not saturated: identify the flow, judge the members, pick, charge.
func BenchmarkPickGated(b *testing.B) {
	rt := benchRouter(b)
	g, err := New(Config{Objectives: map[string]string{"interactive": "10"}}, rt, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ids := []string{"acme", "globex", "initech"}
	ctx := context.Background()
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for i := range b.N {
		f := flowcontrol.Flow{FairnessID: ids[i%3], Priority: 10 * (i % 2)}
		d, adm, err := g.Acquire(ctx, f, route.Request{Key: uint64(i) * 0x9e3779b97f4a7c15, Model: "m", PromptTokens: 500}, 2000)
		if err != nil || adm.Queued {
			b.Fatal(err, adm)
		}
		d.Done()
		g.Charge("m", f, 0, 16)
	}
}
