package sim

import (
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// completion makes a completion request from (segment id, tokens) pairs.
func completion(segs ...[2]int) *Request {
	r := &Request{Output: 10}
	for _, s := range segs {
		r.Prompt = append(r.Prompt, Segment{ID: uint64(s[0]), Tokens: s[1]})
	}
	return r
}

func testFleet(n int) *fleet {
	f := &fleet{}
	for i := range n {
		f.active = append(f.active, i)
	}
	return f
}

func pickAt(t *testing.T, p picker, r *Request, now time.Time) (*flight, int) {
	t.Helper()
	fl := &flight{req: r, now: now}
	i, ok := p.pick(fl)
	if !ok {
		t.Fatal("a peer refused a request")
	}
	fl.replica = i
	return fl, i
}

func TestSGLangCacheThresholdAndBalance(t *testing.T) {
	p := newSGLangPicker(testFleet(2), 1).(*sglangPicker)
	// A 1,000-character text lands on a tenant with an empty tree.
	_, home := pickAt(t, p, completion([2]int{1, 250}), epoch)
	other := 1 - home
	// Sharing 200 of 1,000 characters (0.2 ≤ 0.3) goes to the smallest
	// tree, the other tenant.
	if _, got := pickAt(t, p, completion([2]int{1, 50}, [2]int{2, 200}), epoch); got != other {
		t.Errorf("match 0.2: went to %d, want the smallest tree %d", got, other)
	}
	// Sharing 500 of 1,000 characters (0.5 > 0.3) follows the match.
	if _, got := pickAt(t, p, completion([2]int{1, 125}, [2]int{3, 125}), epoch); got != home {
		t.Errorf("match 0.5: went to %d, want the matching tenant %d", got, home)
	}
	// Loads 70 and 10: max−min = 60 ≤ 64, still balanced: the cache wins.
	p.load[home], p.load[other] = 70, 10
	if fl, got := pickAt(t, p, completion([2]int{1, 250}), epoch); got != home || fl.spilled {
		t.Errorf("loads 70/10: went to %d (balance rule %v), want %d by the cache", got, fl.spilled, home)
	}
	// Loads 100 and 10: 90 > 64 and 100 > 1.5×10: the least loaded wins.
	p.load[home], p.load[other] = 100, 10
	if fl, got := pickAt(t, p, completion([2]int{1, 250}), epoch); got != other || !fl.spilled {
		t.Errorf("loads 100/10: went to %d (balance rule %v), want %d by the balance rule", got, fl.spilled, other)
	}
	// Loads 100 and 70: 30 ≤ 64: balanced again; a text only home holds
	// goes home.
	p.load[home], p.load[other] = 100, 70
	if _, got := pickAt(t, p, completion([2]int{1, 125}, [2]int{3, 125}), epoch); got != home {
		t.Errorf("loads 100/70: went to %d, want %d", got, home)
	}
}

func TestSGLangEvictionKeepsTreesBounded(t *testing.T) {
	p := newSGLangPicker(testFleet(1), 1).(*sglangPicker)
	for i := range 3 {
		pickAt(t, p, completion([2]int{10 + i, 1000}), epoch)
	}
	before := p.chars[0]
	// Pretend the limit is one text: evict the two oldest.
	p.chars[0] += sgMaxTreeSize - 4000
	p.evict()
	if got := p.chars[0] - (sgMaxTreeSize - 4000); got > 4000 || got >= before {
		t.Fatalf("after eviction the tree holds %d of %d characters", got, before)
	}
	// The newest text is still matched in full.
	p.text = routingText(p.text[:0], completion([2]int{12, 1000}), " ")
	p.chunks = chainChunks(p.chunks[:0], p.text, sgChunk, 0x5c1a, true)
	for _, h := range p.chunks {
		if p.nodes[h] == nil {
			t.Fatal("eviction removed part of the most recent text")
		}
	}
}

func TestVLLMPrefixAwareLongestMatch(t *testing.T) {
	p := newVLLMPrefixPicker(testFleet(4), 3).(*vllmPrefixPicker)
	_, home := pickAt(t, p, completion([2]int{1, 400}), epoch)
	// The same prefix always finds its endpoint, load or not.
	for range 20 {
		if _, got := pickAt(t, p, completion([2]int{1, 300}, [2]int{2, 100}), epoch); got != home {
			t.Fatalf("shared 1,200 characters: went to %d, want %d", got, home)
		}
	}
	// No match: random over every endpoint.
	seen := map[int]bool{}
	for i := range 40 {
		_, got := pickAt(t, p, completion([2]int{100 + i, 100}), epoch)
		seen[got] = true
	}
	if len(seen) < 3 {
		t.Errorf("unmatched requests reached only %d of 4 endpoints", len(seen))
	}
}

func TestDynamoPicksMinCost(t *testing.T) {
	x := completion([2]int{1, 1000}) // 62 full blocks and 8 tokens
	// While x's prefill is pending on a: a costs (1000 + 8)/16 + 62 = 125,
	// b costs 1000/16 + 62 = 124.5: b wins despite a's cached blocks.
	p := newDynamoPicker(testFleet(2), 1).(*dynamoPicker)
	_, a := pickAt(t, p, x, epoch)
	if _, got := pickAt(t, p, completion([2]int{1, 1000}), epoch.Add(time.Second)); got != 1-a {
		t.Fatalf("with a's prefill pending: went to %d, want %d (cost 124.5 < 125)", got, 1-a)
	}
	// Once x's first token is back, a costs 8/16 + 62 = 62.5 against
	// b's 124.5: a wins.
	p = newDynamoPicker(testFleet(2), 1).(*dynamoPicker)
	flx, a := pickAt(t, p, x, epoch)
	p.firstToken(flx, 0, 0)
	if _, got := pickAt(t, p, completion([2]int{1, 1000}), epoch.Add(time.Second)); got != a {
		t.Fatalf("after a's prefill: went to %d, want %d (cost 62.5 < 124.5)", got, a)
	}
	// Predictions last the TTL (120 s) from the routing decision.
	if ov := p.overlap(a, flx.blockHashes(), epoch.Add(dynTTL+2*time.Second)); ov != 0 {
		t.Errorf("overlap %d blocks after the TTL, want 0", ov)
	}
	if ov := p.overlap(a, flx.blockHashes(), epoch.Add(2*time.Second)); ov != 62 {
		t.Errorf("overlap %d blocks within the TTL, want 62", ov)
	}
	// Done releases the active blocks.
	p.done(flx)
	if n := len(p.workers[a].blocks); n != 62 {
		t.Errorf("%d active blocks after x finished while y holds the same 62", n)
	}
}

func TestGIEWeightedScores(t *testing.T) {
	f := testFleet(2)
	f.scraped, f.scrapedAt = []scraped{{}, {}}, epoch
	p := newGIEPicker(f, 1).(*giePicker)
	_, home := pickAt(t, p, completion([2]int{1, 400}), epoch) // 1,600 characters, 25 blocks
	other := 1 - home
	// The home server's queue is the longest: a full match (3 × 1) still
	// beats the shortest queue (2 × 1).
	f.scraped[home].waiting, f.scraped[other].waiting = 10, 0
	if _, got := pickAt(t, p, completion([2]int{1, 400}), epoch); got != home {
		t.Errorf("full match vs queue: went to %d, want %d", got, home)
	}
	// A 40% match (3 × 0.4 = 1.2) loses to the queue (2 × 1).
	if _, got := pickAt(t, p, completion([2]int{1, 160}, [2]int{5, 240}), epoch); got != other {
		t.Errorf("40%% match vs queue: went to %d, want %d", got, other)
	}
	// KV usage weighs like the queue: a full match on a server at 100%
	// KV and the longest queue (3 + 0 + 0) loses to an empty one (0 + 2 + 2).
	f.scraped[home].kvUsage = 1
	if _, got := pickAt(t, p, completion([2]int{1, 400}), epoch); got != other {
		t.Errorf("full match on a full, busy server: went to %d, want %d", got, other)
	}
}

// TestOracleIsPreciseCostRouting: the oracle is prefix-index's cost model
// and cold rules fed with the replicas' true caches and the fleet's true
// loads, so in one run it finds at least what prefix-index's predictions
// find (less a point for ties the two break differently) and keeps the
// same bound.
func TestOracleIsPreciseCostRouting(t *testing.T) {
	for _, w := range []string{"zipf", "sharegpt"} {
		rep := small(t, Options{Workload: w, Requests: 400, Policies: []string{"prefix-index", oraclePolicy}})
		pi, oracle := rep.Policies[0], rep.Policies[1]
		if oracle.Role != RoleOracle || pi.Name != "prefix-index" {
			t.Fatalf("%s: entries %s, %s", w, pi.Name, oracle.Name)
		}
		if oracle.HitRate < pi.HitRate-0.01 {
			t.Errorf("%s: oracle hit rate %.4f below prefix-index's %.4f", w, oracle.HitRate, pi.HitRate)
		}
		if oracle.MaxInflightOverBound != 0 {
			t.Errorf("%s: oracle %d over prefix-index's bound", w, oracle.MaxInflightOverBound)
		}
	}
}

func TestOracleReadsTheEngines(t *testing.T) {
	preset, _ := vllmsim.LookupPreset("tiny")
	w := &Workload{Name: "two", Replicas: 3, Engine: preset.Engine}
	doc := [2]int{7, 300}
	for i := range 6 {
		w.Requests = append(w.Requests, &Request{At: secs(float64(i)), Prompt: []Segment{{ID: uint64(doc[0]), Tokens: doc[1]}, {ID: uint64(100 + i), Tokens: 20}}, Output: 2})
	}
	f, err := newFleet(w, Options{Replicas: 3, Routers: 1, Seed: 1, SLO: DefaultSLO}, oraclePolicy, nil, func() {})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.run()
	if err != nil {
		t.Fatal(err)
	}
	// After the first request every one finds the document cached where
	// the first went.
	if got := res.Share[0] + res.Share[1] + res.Share[2]; got != 1 || max(res.Share[0], res.Share[1], res.Share[2]) != 1 {
		t.Errorf("shares %v: the oracle did not follow the cache", res.Share)
	}
	if want := 5.0 * 288 / (6 * 320); res.HitRate < want-0.01 {
		t.Errorf("hit rate %.3f, want about %.3f", res.HitRate, want)
	}
}

// TestOracleFillsEmptyReplicasFirst: prefix-index's empty-member rule on the
// true caches. Five documents no replica holds, one after another on five
// replicas: while a replica caches nothing, a cold prompt skips a home that
// holds other documents, so each replica serves one. The requests carry no
// routing key (newFleet does not fill them), so every prompt has the same
// ring home: without the rule all five land there.
func TestOracleFillsEmptyReplicasFirst(t *testing.T) {
	preset, _ := vllmsim.LookupPreset("tiny")
	const n = 5
	w := &Workload{Name: "five", Replicas: n, Engine: preset.Engine}
	for i := range n {
		w.Requests = append(w.Requests, &Request{At: secs(float64(i)), Prompt: []Segment{{ID: uint64(10 + i), Tokens: 320}}, Output: 2})
	}
	f, err := newFleet(w, Options{Replicas: n, Routers: 1, Seed: 1, SLO: DefaultSLO}, oraclePolicy, nil, func() {})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.run()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range res.Share {
		if s != 1.0/n {
			t.Errorf("replica %d share %.2f of %v: want every replica one document", i, s, res.Share)
		}
	}
}

// TestPeersFollowScaleEvents: every peer keeps routing, onto the added
// replica too, when replicas come and go (the GIE peer's scraped metrics
// must cover a replica added since the last scrape).
func TestPeersFollowScaleEvents(t *testing.T) {
	pols := append(append([]string{}, peerOrder...), oraclePolicy)
	rep := small(t, Options{Workload: "zipf", Requests: 400, Routers: 2, Policies: pols,
		Scale: []ScaleEvent{{Delta: 1, Fraction: 0.3, IsFraction: true}, {Delta: -2, Fraction: 0.7, IsFraction: true}}})
	for _, p := range rep.Policies {
		if p.Failed != 0 || len(p.Share) != 8 || p.Share[7] == 0 {
			t.Errorf("%s: failed %d, shares %v", p.Name, p.Failed, p.Share)
		}
	}
}
