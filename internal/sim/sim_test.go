package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

func TestChatTokensMatchRenderChat(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: []Segment{{ID: 1, Tokens: 40}}},
		{Role: "user", Content: []Segment{{ID: 2, Tokens: 7}, {ID: 3, Tokens: 5}}},
		{Role: "tool", Content: nil},
		{Role: "user", Content: []Segment{{ID: 4, Tokens: 3}}},
	}
	want := vllmsim.Tokenize(renderChat(msgs))
	got := chatTokens(nil, msgs)
	if !slices.Equal(got, want) {
		t.Fatalf("chatTokens differ from Tokenize(RenderChat): %d vs %d tokens", len(got), len(want))
	}
	r := &Request{Messages: msgs}
	if r.PromptTokens() != len(want) {
		t.Fatalf("PromptTokens = %d, want %d", r.PromptTokens(), len(want))
	}
	segs := []Segment{{ID: 9, Tokens: 512}, {ID: 10, Tokens: 17}}
	if got, want := (&Request{Prompt: segs}).appendTokens(nil), vllmsim.Tokenize(segText(segs)); !slices.Equal(got, want) {
		t.Fatal("segment tokens differ from the tokenized segment text")
	}
}

func TestKeyerMatchesFullBody(t *testing.T) {
	// The compact, truncated body must key exactly like the whole body.
	k := newKeyer(0)
	r := &Request{Messages: []Message{
		{Role: "system", Content: []Segment{{ID: 1, Tokens: 9000}}},
		{Role: "user", Content: []Segment{{ID: 2, Tokens: 50}}},
	}}
	got, err := k.key(r)
	if err != nil {
		t.Fatal(err)
	}
	full := newKeyer(0)
	full.limit = 1 << 30
	want, err := full.key(r)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != want.Key || !slices.Equal(got.SpillKeys, want.SpillKeys) || len(got.SpillKeys) != 3 {
		t.Fatalf("compact key %x %x, full key %x %x", got.Key, got.SpillKeys, want.Key, want.SpillKeys)
	}
	// Another question on the same document keys the same.
	r2 := &Request{Messages: []Message{r.Messages[0], {Role: "user", Content: []Segment{{ID: 3, Tokens: 70}}}}}
	if got2, _ := k.key(r2); got2.Key != got.Key {
		t.Fatal("same document, different question: keys differ")
	}
}

func small(t *testing.T, opts Options) *Report {
	t.Helper()
	rep, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestDeterministic(t *testing.T) {
	opts := Options{Workload: "zipf", Requests: 400, Seed: 7, Policies: []string{"random", "prefix-aware", "sglang-cache-aware"}}
	a, b := small(t, opts), small(t, opts)
	var ja, jb bytes.Buffer
	if err := a.WriteJSON(&ja); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteJSON(&jb); err != nil {
		t.Fatal(err)
	}
	if ja.String() != jb.String() {
		t.Fatalf("two runs with one seed differ:\n%s\n%s", ja.String(), jb.String())
	}
	opts.Seed = 8
	c := small(t, opts)
	if c.Policies[0].TTFT == a.Policies[0].TTFT {
		t.Error("another seed gave the same random-policy TTFTs")
	}
}

func TestPrefixAwareBeatsRandomLongContext(t *testing.T) {
	rep := small(t, Options{Workload: "long-context", Requests: 1500, Policies: []string{"random", "prefix-aware"}})
	rnd, pa := rep.Policies[0], rep.Policies[1]
	t.Logf("random hit %.3f p50 %.0f ms; prefix-aware hit %.3f p50 %.0f ms", rnd.HitRate, rnd.TTFT.P50, pa.HitRate, pa.TTFT.P50)
	if pa.HitRate < rnd.HitRate+0.4 {
		t.Errorf("prefix-aware hit rate %.3f not well above random %.3f", pa.HitRate, rnd.HitRate)
	}
	if pa.TTFT.P50 >= rnd.TTFT.P50/2 {
		t.Errorf("prefix-aware P50 TTFT %.0f ms not below half of random's %.0f ms", pa.TTFT.P50, rnd.TTFT.P50)
	}
	if pa.MaxInflightOverBound != 0 {
		t.Errorf("prefix-aware exceeded the bound by %d", pa.MaxInflightOverBound)
	}
	if rep.PooledBoundHit < pa.HitRate-0.01 {
		t.Errorf("pooled bound %.3f below prefix-aware %.3f", rep.PooledBoundHit, pa.HitRate)
	}
}

func TestKeysMovedAtScaleEvent(t *testing.T) {
	// 3,000 distinct prefixes, short prompts: keys moved at 7 -> 8 must stay
	// within 1.1/(n+1).
	preset, _ := vllmsim.LookupPreset("tiny")
	w := &Workload{Name: "many-keys", Replicas: 7, Engine: preset.Engine}
	for i := range 3000 {
		w.Requests = append(w.Requests, &Request{
			At:       secs(float64(i) * 0.01),
			Messages: []Message{{Role: "system", Content: []Segment{{ID: uint64(i), Tokens: 300}}}, {Role: "user", Content: []Segment{{ID: 1 << 50, Tokens: 5}}}},
			Output:   2,
		})
	}
	rep, err := Simulate(w, Options{Policies: []string{"prefix-aware", "random"}, Scale: []ScaleEvent{{Delta: 1, Fraction: 0.5, IsFraction: true}}})
	if err != nil {
		t.Fatal(err)
	}
	pa := rep.Policies[0]
	if pa.KeysMovedFraction == nil {
		t.Fatal("no keys-moved measurement for prefix-aware")
	}
	if got, lim := *pa.KeysMovedFraction, 1.1/8; got > lim || got < 0.5/8 {
		t.Errorf("keys moved at 7->8 = %.4f, want within (%.4f, %.4f]", got, 0.5/8, lim)
	}
	if rep.Policies[1].KeysMovedFraction != nil {
		t.Error("random reports keys moved")
	}
	if len(pa.Share) != 8 || pa.Share[7] == 0 {
		t.Errorf("the added replica took no requests: shares %v", pa.Share)
	}
}

func TestJSONShape(t *testing.T) {
	rep := small(t, Options{Workload: "sharegpt", Requests: 200, Policies: []string{"least-outstanding", "consistent-hash"}, Scale: []ScaleEvent{{Delta: -1, Fraction: 0.5, IsFraction: true}}})
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&buf)
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value")
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if got, want := strings.Join(keys(m), ","), "default_policy,policies,pooled_bound_hit_rate,rate,replicas,requests,slo_ms,workload"; got != want {
		t.Fatalf("top-level keys %s, want %s", got, want)
	}
	pols := m["policies"].([]any)
	if len(pols) != 2 {
		t.Fatalf("%d policies", len(pols))
	}
	p := pols[1].(map[string]any)
	if got, want := strings.Join(keys(p), ","), "goodput,goodput_rps,hit_rate,keys_moved_fraction,later_turns_on_previous_replica,max_inflight_over_bound,max_share_ratio,name,output_tokens_per_s,role,share,spill_rate,throughput_rps,ttft_ms"; got != want {
		t.Fatalf("policy keys %s, want %s", got, want)
	}
	if got := strings.Join(keys(p["ttft_ms"].(map[string]any)), ","); got != "p50,p90,p99" {
		t.Fatalf("ttft_ms keys %s", got)
	}
	if p["keys_moved_fraction"] == nil {
		t.Error("consistent-hash has no keys_moved_fraction after a scale event")
	}
}

func TestTraceReplay(t *testing.T) {
	w, err := LoadTrace(filepath.Join("testdata", "mini-trace.jsonl"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Requests) != 60 {
		t.Fatalf("%d requests, want 60", len(w.Requests))
	}
	r := w.Requests[1]
	if r.PromptTokens() != 1596 || r.Output != 37 || r.At.Milliseconds() != 289 {
		t.Fatalf("record 2 parsed as %d tokens, %d output, at %v", r.PromptTokens(), r.Output, r.At)
	}
	// Equal hash ids are equal tokens: the first block of records 1 and 2.
	a, b := w.Requests[0].appendTokens(nil), r.appendTokens(nil)
	if !slices.Equal(a[:512], b[:512]) || slices.Equal(a[512:600], b[1024:1112]) {
		t.Fatal("block tokens do not follow hash ids")
	}
	rep, err := Simulate(w, Options{Policies: []string{"random", "prefix-aware"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PooledBoundHit <= 0 || rep.Policies[1].HitRate <= 0 {
		t.Fatalf("no cache hits on the trace: %+v", rep.Policies)
	}
}

func TestTraceErrors(t *testing.T) {
	good := `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}`
	for _, tc := range []struct{ in, want string }{
		{good + "\nnot json\n", "line 2: not a JSON trace record"},
		{good + "\n\n" + `{"timestamp": 5, "input_length": 600, "output_length": 5}`, `line 3: missing or empty "hash_ids"`},
		{`{"input_length": 600, "output_length": 5, "hash_ids": [1, 2]}`, `line 1: missing "timestamp"`},
		{`{"timestamp": 0, "input_length": 2000, "output_length": 5, "hash_ids": [1, 2]}`, "line 1: input_length 2000 does not fit 2 hash_ids"},
		{`{"timestamp": 9, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}` + "\n" + good, "line 2: timestamp 0 ms goes back"},
		{`{"timestamp": 0, "input_length": 600, "output_length": -1, "hash_ids": [1, 2]}`, "line 1: negative output_length"},
		{"", "no records"},
	} {
		_, err := ParseTrace(strings.NewReader(tc.in), 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTrace(%q) error %v, want %q", tc.in, err, tc.want)
		}
	}
	if _, err := LoadTrace(filepath.Join(t.TempDir(), "missing.jsonl"), 0); err == nil {
		t.Error("missing trace file: no error")
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Workload: "nope", Requests: 10}, `unknown workload "nope"`},
		{Options{Workload: "zipf", Requests: 10, Policies: []string{"fastest"}}, `unknown policy "fastest"`},
		{Options{Workload: "zipf", Requests: 10, Replicas: -3}, "--replicas -3 out of range"},
		{Options{Workload: "zipf", Requests: 10, Routers: 1000}, "--routers 1000 out of range"},
		{Options{Workload: "zipf", Requests: 10, Scale: []ScaleEvent{{Delta: -7, At: 0}}}, "leaves no replica"},
	} {
		if _, err := Run(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) error %v, want %q", tc.opts, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"+1", "want +K@WHEN"},
		{"1@50%", "signed non-zero"},
		{"+1@150%", "not a percentage"},
		{"-1@soon", "not a non-negative number"},
	} {
		if _, err := ParseScale(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseScale(%q) error %v, want %q", tc.in, err, tc.want)
		}
	}
	evs, err := ParseScale("+1@50%, -2@90s")
	if err != nil || len(evs) != 2 || !evs[0].IsFraction || evs[1].Delta != -2 || evs[1].At.Seconds() != 90 {
		t.Fatalf("ParseScale: %+v, %v", evs, err)
	}
}

func TestRoutersAndPlots(t *testing.T) {
	rep := small(t, Options{Workload: "agent", Requests: 300, Routers: 3, Policies: []string{"prefix-aware", "sglang-cache-aware"}})
	dir := t.TempDir()
	if _, err := rep.WritePlots(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ttft-cdf.svg", "share.svg", "hit-rate.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.HasPrefix(b, []byte("<svg")) || !bytes.HasSuffix(b, []byte("</svg>\n")) {
			t.Errorf("%s: not an SVG (%v)", f, err)
		}
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil || !strings.Contains(buf.String(), "3 routers") {
		t.Errorf("table: %v\n%s", err, buf.String())
	}
	_ = fmt.Sprint()
}

// TestLoadHintsMakeRoutersOne: four routers that each see the fleet's load
// every 100 ms of virtual time keep the hit rate of one router and the
// fleet-wide bound nearly; without hints each bounds only its own quarter of
// the load, so together they overshoot the fleet-wide bound.
func TestLoadHintsMakeRoutersOne(t *testing.T) {
	opts := Options{Workload: "long-context", Requests: 800, Policies: []string{"prefix-aware"}}
	one := small(t, opts).Policies[0]
	opts.Routers = 4
	blind := small(t, opts).Policies[0]
	opts.LoadHintInterval = 100 * time.Millisecond
	hinted := small(t, opts).Policies[0]
	t.Logf("one router: hit %.3f spill %.3f; 4 routers: hit %.3f spill %.3f over %d; 4 with hints: hit %.3f spill %.3f over %d",
		one.HitRate, one.SpillRate, blind.HitRate, blind.SpillRate, blind.MaxInflightOverBound, hinted.HitRate, hinted.SpillRate, hinted.MaxInflightOverBound)
	if hinted.HitRate < one.HitRate-0.02 {
		t.Errorf("4 routers with hints: hit %.3f more than 2 points below one router's %.3f", hinted.HitRate, one.HitRate)
	}
	if hinted.MaxInflightOverBound >= blind.MaxInflightOverBound || hinted.MaxInflightOverBound > 4 {
		t.Errorf("with hints %d over the fleet-wide bound, without %d", hinted.MaxInflightOverBound, blind.MaxInflightOverBound)
	}
}

// TestPrefixIndexBeatsPrefixAwareMultiTurn: on multi-turn chats behind a few
// shared system prompts (sharegpt), the prefix index finds each turn's
// history where the previous turn left it, where the key (which leaves out
// the final message) sends turn 1 and turn 2 to different homes. Ratios
// from one run.
func TestPrefixIndexBeatsPrefixAwareMultiTurn(t *testing.T) {
	rep := small(t, Options{Workload: "sharegpt", Requests: 3000, Policies: []string{"prefix-aware", "prefix-index"}})
	pa, pi := rep.Policies[0], rep.Policies[1]
	t.Logf("prefix-aware hit %.3f p90 %.0f ms same-replica %.3f; prefix-index hit %.3f p90 %.0f ms same-replica %.3f; pooled %.3f",
		pa.HitRate, pa.TTFT.P90, *pa.SameReplicaTurns, pi.HitRate, pi.TTFT.P90, *pi.SameReplicaTurns, rep.PooledBoundHit)
	if pi.HitRate < 1.3*pa.HitRate {
		t.Errorf("prefix-index hit rate %.3f not 1.3× prefix-aware's %.3f", pi.HitRate, pa.HitRate)
	}
	if pi.TTFT.P90 > pa.TTFT.P90 {
		t.Errorf("prefix-index p90 TTFT %.0f ms above prefix-aware's %.0f ms", pi.TTFT.P90, pa.TTFT.P90)
	}
	if *pi.SameReplicaTurns < 0.85 || *pi.SameReplicaTurns < 2*(*pa.SameReplicaTurns) {
		t.Errorf("later turns on the previous replica: prefix-index %.3f, prefix-aware %.3f", *pi.SameReplicaTurns, *pa.SameReplicaTurns)
	}
	if pi.MaxInflightOverBound != 0 {
		t.Errorf("prefix-index exceeded the bound by %d", pi.MaxInflightOverBound)
	}
}

// TestKeyerBlocksCarryTurns: a later turn's blocks begin with the previous
// turn's blocks and its answer's, which is what the index learns at Done.
func TestKeyerBlocksCarryTurns(t *testing.T) {
	w, err := BuildWorkload("sharegpt", 400, 3)
	if err != nil {
		t.Fatal(err)
	}
	k := newKeyer(0)
	for _, r := range w.Requests {
		k.blocks(r)
	}
	linkAnswers(w.Requests)
	later := 0
	for _, r := range w.Requests {
		if r.parent == nil {
			continue
		}
		later++
		prev := append(r.parent.appendBlocks(nil), r.parent.answer...)
		cur := r.appendBlocks(nil)
		if len(cur) <= len(prev) || !slices.Equal(prev, cur[:len(prev)]) {
			t.Fatalf("turn's blocks do not start with the previous turn and its answer")
		}
		if r.est <= r.parent.est {
			t.Fatalf("later turn estimated at %d tokens, previous %d", r.est, r.parent.est)
		}
	}
	if later < 100 {
		t.Fatalf("only %d later turns linked", later)
	}
}
