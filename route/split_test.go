package route

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func pool(prefix string, n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Name: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return ms
}

func TestSplitCostModel(t *testing.T) {
	c := SplitCost{Interference: 0.25, TransferWeight: 0.05, MinTokens: 256}
	for _, tc := range []struct {
		name string
		in   SplitInput
		want SplitReason
		agg  int64
		dis  int64
	}{
		{"cached on decode", SplitInput{PromptTokens: 4000, DecodeMatched: 3900, DecodeLoad: 20, HavePrefill: true}, SplitFewTokens, 0, 0},
		{"no prefill worker", SplitInput{PromptTokens: 4000, DecodeLoad: 20}, SplitNoPrefill, 0, 0},
		// 4000·(1+0.25·8) = 12000 against 4000 + 200.
		{"busy decode", SplitInput{PromptTokens: 4000, DecodeLoad: 8, HavePrefill: true}, SplitCheaper, 12000, 4200},
		// Idle decode worker: 4000 against 4000 + 200.
		{"idle decode", SplitInput{PromptTokens: 4000, HavePrefill: true}, SplitDearer, 4000, 4200},
		// The prefill pool's queue outweighs the interference.
		{"prefill queue", SplitInput{PromptTokens: 4000, DecodeLoad: 8, HavePrefill: true, PrefillQueued: 9000}, SplitDearer, 12000, 13200},
		// The prefill worker holds most of the prompt: 1000 + 150 against 3000·3.
		{"prefill holds it", SplitInput{PromptTokens: 4000, DecodeMatched: 1000, DecodeLoad: 8, HavePrefill: true, PrefillMatched: 3000}, SplitCheaper, 9000, 1150},
	} {
		d := c.Split(tc.in)
		if d.Reason != tc.want || d.Split != (tc.want == SplitCheaper) || d.Aggregated != tc.agg || d.Disaggregated != tc.dis {
			t.Errorf("%s: got %+v, want reason %v, costs %d / %d", tc.name, d, tc.want, tc.agg, tc.dis)
		}
		if s := d.String(); !strings.Contains(s, tc.want.String()) {
			t.Errorf("%s: %q does not name the reason", tc.name, s)
		}
	}
}

func TestSplitConfigDefaultsAndValidation(t *testing.T) {
	got := (&Config{}).splitCost()
	if got != (SplitCost{DefaultSplitInterference, DefaultSplitTransferWeight, DefaultSplitMinTokens}) {
		t.Errorf("defaults: %+v", got)
	}
	if got := (&Config{SplitInterference: -1, SplitTransferWeight: -1, SplitMinTokens: -1}).splitCost(); got != (SplitCost{}) {
		t.Errorf("negative means 0: %+v", got)
	}
	for _, c := range []Config{{SplitInterference: 1e9}, {SplitTransferWeight: nan()}, {SplitMinTokens: MaxCacheTokens + 1}} {
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "Split") {
			t.Errorf("%+v: got %v, want an error naming the field", c, err)
		}
	}
}

func nan() float64 { var z float64; return z / z }

// TestPickSplit routes a long cold prompt to a busy decode pool: it is
// split, the prefill worker is charged and the decode worker's prefill
// charge released; a short one stays aggregated and charges no prefill
// worker; the probe charges nothing.
func TestPickSplit(t *testing.T) {
	dec := indexRouter(t, Config{}, pool("decode", 2))
	pre := indexRouter(t, Config{}, pool("prefill", 2))
	// Two requests decoding on every decode worker.
	var hold []Decision
	for i := range 4 {
		d, err := dec.PickMember(fmt.Sprintf("decode-%d", i%2), Request{Key: uint64(i), Blocks: chain(uint64(100+i), 2), PromptTokens: 32}, false)
		if err != nil {
			t.Fatal(err)
		}
		d.Report(Outcome{FirstByte: true})
		hold = append(hold, d)
	}
	long := Request{Key: 7, Blocks: chain(7, 128), PromptTokens: 128 * IndexBlockTokens}
	x := ExplainSplit(dec, pre, long)
	p, err := TryPickSplit(dec, pre, long)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Split.Split || p.Split.Reason != SplitCheaper || p.Prefill.Backend == "" || p.Split.Transfer != long.PromptTokens {
		t.Fatalf("long prompt: %+v, want split with all its tokens transferred", p.Split)
	}
	if x.Split.Split != p.Split.Split || x.Decode.Backend != p.Decode.Backend || x.Prefill.Backend != p.Prefill.Backend {
		t.Errorf("ExplainSplit %v on %s/%s, PickSplit %v on %s/%s", x.Split, x.Decode.Backend, x.Prefill.Backend, p.Split, p.Decode.Backend, p.Prefill.Backend)
	}
	if q := dec.snap.Load().members[slices.IndexFunc(dec.snap.Load().members, func(m memberView) bool { return m.name == p.Decode.Backend })].st.prefill.Load(); q != 0 {
		t.Errorf("decode worker still charged %d prefill tokens after a split", q)
	}
	if pre.InFlight() != 1 {
		t.Errorf("prefill pool in flight %d, want 1", pre.InFlight())
	}
	p.Done()
	if pre.InFlight() != 0 || dec.InFlight() != 4 {
		t.Errorf("after Done: prefill %d, decode %d in flight", pre.InFlight(), dec.InFlight())
	}

	short := Request{Key: 9, Blocks: chain(9, 4), PromptTokens: 4 * IndexBlockTokens}
	if _, err := pre.Probe(short); err != nil {
		t.Fatal(err)
	}
	s, err := TryPickSplit(dec, pre, short)
	if err != nil {
		t.Fatal(err)
	}
	if s.Split.Split || s.Split.Reason != SplitFewTokens || s.Prefill.Backend != "" || pre.InFlight() != 0 {
		t.Errorf("short prompt: %+v, prefill in flight %d; want aggregated, nothing on the prefill pool", s.Split, pre.InFlight())
	}
	s.Done()
	for _, d := range hold {
		d.Done()
	}
	if dec.InFlight() != 0 {
		t.Errorf("decode in flight %d after all Done", dec.InFlight())
	}
}

// TestProbeChargesNothing: a probe leaves loads, prefill charges and the
// index as they were, and predicts what a pick then does.
func TestProbeChargesNothing(t *testing.T) {
	r := indexRouter(t, Config{}, pool("prefill", 3))
	req := Request{Key: 3, Blocks: chain(3, 64), PromptTokens: 64 * IndexBlockTokens}
	d, err := r.TryPick(req)
	if err != nil {
		t.Fatal(err)
	}
	d.Done()
	before := idxOf(r).held(idOf(r, d.Backend))
	p, err := r.Probe(Request{Key: 4, Blocks: extend(req.Blocks, 4, 8), PromptTokens: 72 * IndexBlockTokens})
	if err != nil {
		t.Fatal(err)
	}
	if r.InFlight() != 0 || idxOf(r).held(idOf(r, d.Backend)) != before {
		t.Errorf("probe charged: in flight %d, entries %d → %d", r.InFlight(), before, idxOf(r).held(idOf(r, d.Backend)))
	}
	if p.Backend != d.Backend || p.MatchedTokens < 60*IndexBlockTokens {
		t.Errorf("probe %+v, want %s holding the 64-block prefix", p, d.Backend)
	}
	for _, st := range r.Status() {
		if st.InFlight != 0 {
			t.Errorf("%s in flight %d", st.Name, st.InFlight)
		}
	}
}

// TestPickSplitPrefillFull: a prefill pool at its bound makes the request
// aggregated, never an error.
func TestPickSplitPrefillFull(t *testing.T) {
	dec := indexRouter(t, Config{}, pool("decode", 1))
	pre := indexRouter(t, Config{DefaultThreshold: 1, QueueWait: time.Millisecond}, pool("prefill", 1))
	busy, err := pre.TryPick(Request{Key: 1})
	if err != nil {
		t.Fatal(err)
	}
	var hold []Decision
	for i := range 8 {
		d, err := dec.TryPick(Request{Key: uint64(i + 10)})
		if err != nil {
			t.Fatal(err)
		}
		hold = append(hold, d)
	}
	p, err := TryPickSplit(dec, pre, Request{Key: 7, Blocks: chain(7, 128), PromptTokens: 128 * IndexBlockTokens})
	if err != nil {
		t.Fatal(err)
	}
	if p.Split.Split || p.Split.Reason != SplitNoPrefill {
		t.Errorf("got %+v, want aggregated for want of a prefill worker", p.Split)
	}
	p.Done()
	busy.Done()
	for _, d := range hold {
		d.Done()
	}
}

// BenchmarkSplitDecision measures what deciding the split adds to the
// decode pick of a request: the prefill pool's probe, the cost model, the
// prefill worker's pick, its first byte and Done. 16 prefill workers with
// prefix-index, 256 prompts of 512 blocks (32 KiB) each held by one of
// them; the decode pick (BenchmarkPrefixIndex's work) is given: a decode
// worker holding 8 requests and none of the prompt, so every request is
// split. "decide-only" stops at the decision (probe and cost model),
// before the prefill pick. "aggregated" is a decode worker that holds the prompt: the
// decision ends before the probe.
func BenchmarkSplitDecision(b *testing.B) {
	const docs, blocks = 256, 512
	dec := mustNew(b, Config{Policy: "prefix-index"}, pool("decode", 1))
	pre := mustNew(b, Config{Policy: "prefix-index", DefaultThreshold: MaxThreshold}, pool("prefill", 16))
	reqs := make([]Request, docs)
	first := Outcome{FirstByte: true, PromptTokens: -1, CachedTokens: -1}
	for i := range reqs {
		reqs[i] = Request{Key: splitmix(uint64(i)), Blocks: chain(uint64(i)+1, blocks), PromptTokens: blocks * IndexBlockTokens}
		d, err := pre.TryPick(reqs[i])
		if err != nil {
			b.Fatal(err)
		}
		d.Report(first)
		d.Done()
	}
	for _, bc := range []struct {
		name    string
		matched int
		split   bool
	}{{"split", 0, true}, {"aggregated", blocks * IndexBlockTokens, false}, {"decide-only", 0, true}} {
		b.Run(bc.name, func(b *testing.B) {
			d := Decision{Backend: "decode-0", Load: 9, MatchedTokens: bc.matched, Cost: missWeight * (blocks*IndexBlockTokens - bc.matched)}
			took := make([]time.Duration, 0, 1<<20)
			b.ReportAllocs()
			defer cpuPerOp(b)()
			i := 0
			for b.Loop() {
				start := time.Now()
				if bc.name == "decide-only" {
					decideOnly(b, d, dec, pre, &reqs[i%docs])
					took = append(took[:min(len(took), cap(took)-1)], time.Since(start))
					i++
					continue
				}
				p := splitAfter(d, dec, pre, &reqs[i%docs])
				if p.Split.Split != bc.split {
					b.Fatalf("split %v, want %v: %v", p.Split.Split, bc.split, p.Split)
				}
				p.Prefill.Report(first)
				p.Prefill.Done()
				if len(took) < cap(took) {
					took = append(took, time.Since(start))
				}
				i++
			}
			b.StopTimer()
			slices.Sort(took)
			if len(took) > 0 {
				b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "median-ns")
			}
		})
	}
}

// decideOnly is splitAfter up to its decision: the probe and the cost
// model, no prefill pick.
func decideOnly(b *testing.B, d Decision, dec, pre *Router, req *Request) {
	pr, err := pre.Probe(*req)
	if err != nil {
		b.Fatal(err)
	}
	in := SplitInput{PromptTokens: req.PromptTokens, DecodeMatched: d.MatchedTokens, DecodeLoad: d.Load - 1,
		HavePrefill: true, PrefillMatched: pr.MatchedTokens, PrefillQueued: pr.QueuedTokens}
	if !dec.SplitCost().Split(in).Split {
		b.Fatal("not split")
	}
}
