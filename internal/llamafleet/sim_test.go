package llamafleet

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/sim"
	"github.com/prefixgate/prefixgate/route"
)

// simPreset is the vllmsim engine model of this fleet.
const simPreset = "llamacpp-tiny-cpu"

// simCharsPerToken is how many characters of text the simulator makes of
// one token (its words are four characters); the tiny model makes one token
// of each character. The replays give the simulator the same text lengths,
// so routing keys see the same text as on the fleet, and divide the engine's
// cache and prefill rate by the same factor, so hit rates and times keep
// their meaning.
const simCharsPerToken = 4

func simTokens(chars int) int { return max((chars+simCharsPerToken-1)/simCharsPerToken, 1) }

func simEngine(e vllmsim.EngineConfig) vllmsim.EngineConfig {
	e.CacheBlocks /= simCharsPerToken
	e.PrefillTokensPerSec /= simCharsPerToken
	return e
}

// closeLoop chains each client's requests, in the order given (the order
// that client sent them), so the simulator sends a client's next request
// when its previous simulated answer ends, as the real clients did
// (sim.Request.FollowAnswer): the same concurrency and order, with the
// simulated engine's own timing instead of the fleet's send times.
func closeLoop(t *testing.T, reqs []*sim.Request, clients []int) {
	last := map[int]*sim.Request{}
	for i, r := range reqs {
		if prev := last[clients[i]]; prev != nil {
			if err := r.FollowAnswer(prev, 0); err != nil {
				t.Fatalf("request %d of client %d: %v", i, clients[i], err)
			}
		}
		last[clients[i]] = r
	}
}

// replayWorkload turns a real document-QA run into a simulator workload:
// the same requests sent by the same clients in the same order, closed-loop
// (closeLoop; the fleet's send offsets are only their nominal arrivals),
// each document one token stream and each question its own, as long as
// their text plus the system message's preamble (see simCharsPerToken).
func replayWorkload(t *testing.T, run *qaRun, m fleetModel, draw uint64) *sim.Workload {
	docs := documents(numDocs)
	w := &sim.Workload{Name: "llamafleet-docqa", Replicas: replicas, Engine: simEngine(m.engine), Cores: m.cores}
	place := placement(t, run.answers)
	var clients []int
	start := run.answers[0].sent
	for _, a := range run.answers {
		if a.sent.Before(start) {
			start = a.sent
		}
	}
	for i, a := range run.answers {
		r := run.reqs[i]
		q := question(r.doc, r.q)
		w.Requests = append(w.Requests, &sim.Request{
			At: a.sent.Sub(start),
			Messages: []sim.Message{
				{Role: "system", Content: []sim.Segment{{ID: segID(draw, uint64(r.doc)+1), Tokens: simTokens(len(docs[r.doc]) + 33)}}},
				{Role: "user", Content: []sim.Segment{{ID: segID(draw, uint64(1000+i)), Tokens: simTokens(len(q))}}},
			},
			Output: maxTokens, Placed: true, Replica: place[i],
		})
		clients = append(clients, a.client)
	}
	closeLoop(t, w.Requests, clients)
	sort.SliceStable(w.Requests, func(i, j int) bool { return w.Requests[i].At < w.Requests[j].At })
	return w
}

// placement numbers the replicas that answered (their backend names in
// sorted order) and returns the replica of each answer, for the
// simulator's replay policy: the simulated request goes where the real one
// went.
func placement(t *testing.T, as []answer) []int {
	var names []string
	for _, a := range as {
		if !slices.Contains(names, a.backend) {
			names = append(names, a.backend)
		}
	}
	if len(names) > replicas {
		t.Fatalf("answers name %d backends %v, more than the fleet's %d replicas", len(names), names, replicas)
	}
	sort.Strings(names)
	out := make([]int, len(as))
	for i, a := range as {
		out[i] = slices.Index(names, a.backend)
	}
	return out
}

// fleetModel is the simulator's model of this fleet in one run: the
// preset's engine at the rates a replica has on a core of its own, and how
// many cores the replicas shared (sim.Workload.Cores).
type fleetModel struct {
	engine vllmsim.EngineConfig
	cores  float64
}

// share is the fraction of a core each of busy computing replicas gets
// on cores cores.
func share(cores, busy float64) float64 { return min(1, cores/busy) }

// busyDuring is how many replicas were computing, on average, between from
// and to while answer i of as ran: its own and every other replica with a
// request of the same run in its compute span (computeSpan).
func busyDuring(as []answer, i int, from, to time.Time) float64 {
	if !to.After(from) {
		return 1
	}
	busy := map[string]time.Duration{}
	for j, b := range as {
		if j == i || b.backend == as[i].backend {
			continue
		}
		bs, be := computeSpan(b)
		if o := earlier(be, to).Sub(later(bs, from)); o > 0 {
			busy[b.backend] += o
		}
	}
	k := 1.0
	for _, d := range busy {
		k += min(1, float64(d)/float64(to.Sub(from)))
	}
	return k
}

// fitFleet fits the fleet model to the timings the replicas reported in
// the runs given (this test's; each run had a fleet of its own). The
// preset's rates were measured on an idle core; here four one-thread
// replicas share the machine's cores, and a prefill's rate depends on how
// many replicas computed beside it: about 5,000 tokens/s alone, 2,200 with
// all four busy on 2 cores. So the model gives the replicas the machine's
// cores (runtime.NumCPU; sim.Workload.Cores slows each busy replica to
// share(cores, busy)) and fits the rate a replica has on a core of its own
// by least squares on the prefill times, each prefill's tokens at that rate
// times its share, busy measured from the answers' spans. The decode step
// is the replicas' decode time, each scaled by its share, per token. The
// per-request cost is left to fitOverhead.
func fitFleet(t *testing.T, name string, runs ...[]answer) fleetModel {
	preset, err := vllmsim.LookupPreset(simPreset)
	if err != nil {
		t.Fatal(err)
	}
	cores := float64(runtime.NumCPU())
	type prefill struct{ tokens, ms, busy float64 }
	var ps []prefill
	var decodeN int
	var avgN, avgMS float64
	for _, as := range runs {
		for i, a := range as {
			if a.promptN > a.prompt/2 && a.promptMS > 0 { // prefills, not cache hits with a short tail
				from, _ := computeSpan(a)
				to := from.Add(time.Duration(a.promptMS * float64(time.Millisecond)))
				ps = append(ps, prefill{float64(a.promptN), a.promptMS, busyDuring(as, i, from, to)})
				avgN += float64(a.promptN)
				avgMS += a.promptMS
			}
			decodeN += a.decodeN
		}
	}
	if len(ps) == 0 || decodeN == 0 {
		t.Fatal("llama-server reported no timings (timings.prompt_n, timings.predicted_n)")
	}
	// ms ≈ x · tokens/share: least squares for x, ms per token alone.
	var num, den float64
	for _, p := range ps {
		a := p.tokens / share(cores, p.busy)
		num += a * p.ms
		den += a * a
	}
	x := num / den
	sse := 0.0
	for _, p := range ps {
		d := p.ms - x*p.tokens/share(cores, p.busy)
		sse += d * d
	}
	m := fleetModel{engine: preset.Engine, cores: cores}
	m.engine.PrefillTokensPerSec = 1000 / x
	var coreMS float64
	for _, as := range runs {
		for i, a := range as {
			if a.decodeN > 0 {
				end := a.sent.Add(a.latency)
				coreMS += ms(a.decode) * share(m.cores, busyDuring(as, i, end.Add(-a.decode), end))
			}
		}
	}
	m.engine.DecodeStepBase = time.Duration(coreMS / float64(decodeN) * float64(time.Millisecond))
	m.engine.PrefillOverhead = 0
	t.Logf("fleet model of the %s run: %.0f cores shared, prefill %.0f tokens/s on a core of its own (%.0f over the run's %d prefills as they ran; preset %.0f), decode step %v (preset %v), prefill fit rms %.0f ms",
		name, m.cores, m.engine.PrefillTokensPerSec, avgN/(avgMS/1000), len(ps), preset.Engine.PrefillTokensPerSec,
		m.engine.DecodeStepBase.Round(100*time.Microsecond), preset.Engine.DecodeStepBase, math.Sqrt(sse/float64(len(ps))))
	return m
}

// computeSpan is when llama-server was computing a: from the start of its
// prompt processing (timings.prompt_ms before its decoding) to its answer.
func computeSpan(a answer) (time.Time, time.Time) {
	end := a.sent.Add(a.latency)
	return end.Add(-a.decode - time.Duration(a.promptMS*float64(time.Millisecond))), end
}

// prefillByContention groups the prefills of one run's answers by how
// many replicas were computing while they ran (busyDuring, rounded) and
// returns each group's tokens per second, index k-1 for k replicas, 0
// where the group is empty, and each group's count: the evidence for the
// shared cores in fitFleet.
func prefillByContention(as []answer) (rates []float64, counts []int) {
	tokens := make([]int, replicas)
	msSum := make([]float64, replicas)
	counts = make([]int, replicas)
	for i, a := range as {
		if a.promptN <= a.prompt/2 || a.promptMS <= 0 {
			continue
		}
		from, _ := computeSpan(a)
		to := from.Add(time.Duration(a.promptMS * float64(time.Millisecond)))
		k := min(replicas, int(math.Round(busyDuring(as, i, from, to))))
		tokens[k-1] += a.promptN
		msSum[k-1] += a.promptMS
		counts[k-1]++
	}
	rates = make([]float64, replicas)
	for k := range rates {
		if msSum[k] > 0 {
			rates[k] = float64(tokens[k]) / (msSum[k] / 1000)
		}
	}
	return rates, counts
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// uncontendedHits returns the time to first token, as the client saw it,
// of every cache hit that had its replica to itself: no other request of
// the same run was on that replica at any time between its send and its
// answer. They hold no queueing, which the simulator models, only the
// per-request work: prompt restore and tail, and what a loaded machine adds
// around it (HTTP, the router, waiting for a core). Each is scaled by the
// share of a core its replica had on cores shared cores (the simulator
// stretches the cost by the same share when replicas compete).
func uncontendedHits(cores float64, runs ...[]answer) []float64 {
	var out []float64
	for _, as := range runs {
		for i, a := range as {
			if a.promptN == 0 || a.promptN > a.prompt/2 {
				continue
			}
			alone := true
			for j, b := range as {
				if j != i && b.backend == a.backend && b.sent.Before(a.sent.Add(a.latency)) && a.sent.Before(b.sent.Add(b.latency)) {
					alone = false
					break
				}
			}
			if alone {
				ttftEnd := a.sent.Add(a.latency - a.decode)
				out = append(out, ms(a.latency-a.decode)*share(cores, busyDuring(as, i, a.sent, ttftEnd)))
			}
		}
	}
	sort.Float64s(out)
	return out
}

// fitOverhead fits the engine's per-request cost (PrefillOverhead) so the
// simulator's uncontended cache hit of this workload (pair: a miss and then
// a hit on the same prefix, one client, one replica) takes as long as the
// fleet's uncontended hits took from the client (their median in this run).
// The simulator rounds a hit's uncached tail up to whole 16-token blocks of
// its 4-character tokens and renders the template in its own tokens, so its
// tail differs from the fleet's; the fit absorbs that, the fleet's restore
// of a saved prompt, and what the loaded machine adds to every request. It
// is never negative. It returns the fit, the fleet's median and the
// simulator's hit without the cost, in ms, and how many hits were alone.
func fitOverhead(t *testing.T, m fleetModel, pair func(fleetModel) *sim.Workload, runs ...[]answer) (time.Duration, float64, float64, int) {
	hits := uncontendedHits(m.cores, runs...)
	if len(hits) == 0 {
		t.Fatal("no cache hit had its replica to itself: nothing to fit the per-request cost on")
	}
	real := hits[len(hits)/2]
	bare := m
	bare.engine.PrefillOverhead = 0
	rep, err := sim.Simulate(pair(bare), sim.Options{Replicas: 1, Policies: []string{"random"}, Seed: 1, Parallel: 1})
	if err != nil {
		t.Fatalf("simulate the uncontended pair: %v", err)
	}
	if rep.Policies[0].HitRate == 0 || len(rep.Policies[0].TTFTs) != 2 {
		t.Fatalf("uncontended pair: hit %.3f over %d answers, want a miss and a hit", rep.Policies[0].HitRate, len(rep.Policies[0].TTFTs))
	}
	simHit := rep.Policies[0].TTFTs[0]
	return time.Duration(max(0, real-simHit) * float64(time.Millisecond)), real, simHit, len(hits)
}

// phaseModel is the fleet model of one run of the test (one policy on a
// fleet of its own): fitFleet on that run's timings, and fitOverhead on
// that run's cache hits that had their replica to themselves (both runs'
// if it has none). Each run is modelled from its own timings because the
// machine is shared: another job's load that slows one run for its few
// seconds slowed the prefixgate run's prefills by a third against the
// random run's in one run of this test (2,108 and 1,641 tokens/s with 3
// and 4 replicas busy, against 3,421 and 2,641), and a model pooled over
// both put the simulated mean TTFT ratio 29% off the fleet's.
func phaseModel(t *testing.T, name string, as []answer, both [][]answer, pair func(fleetModel) *sim.Workload) fleetModel {
	m := fitFleet(t, name, as)
	runs := [][]answer{as}
	if len(uncontendedHits(m.cores, as)) == 0 {
		runs = both
	}
	var realHit, simHit float64
	var alone int
	m.engine.PrefillOverhead, realHit, simHit, alone = fitOverhead(t, m, pair, runs...)
	t.Logf("per-request cost, %s run: %d cache hits alone on their replica took %.1f ms to the first token (median, each scaled by its share of a core), the simulator's uncontended hit %.1f ms without the cost, so %v",
		name, alone, realHit, simHit, m.engine.PrefillOverhead.Round(100*time.Microsecond))
	return m
}

// simSeeds is how many placement draws each replay is simulated with.
// Where a document or conversation lives is a draw: the ring hashes its
// routing key over member names (the fleet's are random ports, the
// simulator's r0..r3) and the simulator's keys are over its own words, not
// the fleet's text, so it cannot reproduce the fleet's draw. With 8
// conversations one draw decides the run: the simulator's draw with
// unsalted text put all 8 on two replicas and its median TTFT at 2-3× the
// fleet's. So each seed salts the replay's text (segID) and seeds the
// random policy, and the simulator's figures are over all draws (its
// expectation), not one.
const simSeeds = 8

// segID is a replay segment's word stream in placement draw draw: the same
// stream for the same text within a draw, another in every other draw.
func segID(draw, id uint64) uint64 { return draw<<48 ^ id }

// simFigures are one policy's simulated TTFTs (ms) with their hit rate,
// mean over the simulations pooled, and the median and mean of the TTFTs.
type simFigures struct {
	hit, medianTTFT, meanTTFT float64
	ttfts                     []float64
}

// poolFigures pools simulations: the mean of their hit rates (the runs
// pooled send the same prompts) and the median and mean of all TTFTs.
func poolFigures(fs ...simFigures) simFigures {
	var p simFigures
	for _, f := range fs {
		p.hit += f.hit / float64(len(fs))
		p.ttfts = append(p.ttfts, f.ttfts...)
	}
	sort.Float64s(p.ttfts)
	p.medianTTFT = p.ttfts[len(p.ttfts)/2]
	for _, v := range p.ttfts {
		p.meanTTFT += v / float64(len(p.ttfts))
	}
	return p
}

func simulateSeeds(t *testing.T, build func(draw uint64) *sim.Workload, policy string) simFigures {
	var fs []simFigures
	for seed := uint64(1); seed <= simSeeds; seed++ {
		rep, err := sim.Simulate(build(seed), sim.Options{
			Replicas: replicas, Policies: []string{policy}, Seed: seed, Parallel: 1,
		})
		if err != nil {
			t.Fatalf("simulate %s: %v", policy, err)
		}
		fs = append(fs, simFigures{hit: rep.Policies[0].HitRate, ttfts: rep.Policies[0].TTFTs})
	}
	return poolFigures(fs...)
}

// simulateReplay runs w, built from the answers as (in their order, then
// sorted by send time), once with the replay policy: every request on the
// replica the fleet put it on, so the simulated figures share the fleet's
// placement draw instead of averaging over draws. It returns the figures
// and each answer's simulated TTFT in ms, in the answers' order.
func simulateReplay(t *testing.T, w *sim.Workload, as []answer) (simFigures, []float64) {
	rep, err := sim.Simulate(w, sim.Options{Replicas: replicas, Policies: []string{sim.ReplayPolicy}, Seed: 1, Parallel: 1})
	if err != nil {
		t.Fatalf("simulate the replay of %s: %v", w.Name, err)
	}
	p := rep.Policies[0]
	f := poolFigures(simFigures{hit: p.HitRate, ttfts: p.TTFTs})
	// The builders sort the requests by send time, stably.
	order := make([]int, len(as))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return as[order[i]].sent.Before(as[order[j]].sent) })
	byAnswer := make([]float64, len(as))
	for k, i := range order {
		byAnswer[i] = p.RequestTTFTs[k]
	}
	return f, byAnswer
}

// replayBreakdown says where the replay's TTFTs part from the fleet's:
// the median of each side over the fleet's cache hits (more than half the
// prompt cached) and over its misses.
func replayBreakdown(as []answer, simTTFT []float64) string {
	var realHit, simHit, realMiss, simMiss []float64
	for i, a := range as {
		if a.cached > a.prompt/2 {
			realHit = append(realHit, ms(a.latency-a.decode))
			simHit = append(simHit, simTTFT[i])
		} else {
			realMiss = append(realMiss, ms(a.latency-a.decode))
			simMiss = append(simMiss, simTTFT[i])
		}
	}
	med := func(xs []float64) float64 {
		if len(xs) == 0 {
			return math.NaN()
		}
		xs = slices.Clone(xs)
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	return fmt.Sprintf("%d hits median %.0f vs %.0f ms, %d misses %.0f vs %.0f ms",
		len(realHit), med(simHit), med(realHit), len(realMiss), med(simMiss), med(realMiss))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// off is how far sim is from real, as a fraction of real.
func off(sim, real float64) float64 { return math.Abs(sim-real) / real }

// simRatioWithin is the target for the simulated prefixgate /
// random latency ratio: within 20% of the fleet's, measured in the same
// test. It is asserted on the replay of the fleet's own placement (policy
// replay) with the shared cores modelled (fitFleet) and each run modelled
// from its own timings (phaseModel), on the mean TTFT ratio over two
// prefixgate/random pairs pooled: within 20% in all 19 such runs without a
// machine stall (at most 13% off, load average 3.6-9.1), where the pooled
// median ratio was within 20% in 15 of 19 and is logged (docs/backends.md
// has the runs). The median is fragile on this traffic: prefixgate's
// median is one of its hits, which either queued behind another request or
// did not, and random's sits on the fast edge of its misses, so a request
// or two moves either by 20%.
const simRatioWithin = 0.20

// simRatioFactor bounds the median TTFT ratio as a sanity check: the
// simulated ratio within this factor of the fleet's, for the replay and
// for the simulator's own policies. Every run without a machine stall
// (steadyRates) landed within 1.5×.
const simRatioFactor = 2.0

// compareSimulator replays the real prefixgate and random runs (pairs of
// them, each run on a fleet of its own) through the simulator, each with
// the fleet model fitted to its own timings (phaseModel), and compares hit
// rates and the prefixgate / random latency ratios (time to first token)
// with the real ones, two ways: the replay policy, which sends every
// request to the replica the fleet sent it to, so the simulated and real
// latencies come from the same placement (the fleet's one ring draw and
// its random balancer's one draw); and the simulator's own policies
// (prefixgate's default and random), which must predict the hit rates from
// their own placement, averaged over draws. Hit rates are compared per
// run; the ratios over the pairs' TTFTs pooled.
func compareSimulator(t *testing.T, pgs, randoms []*qaRun) {
	var realPG, realRandom stats
	var replayPGs, replayRandoms, ownPGs, ownRandoms []simFigures
	rates := map[string]float64{} // each run's single-core prefill rate
	for k, pg := range pgs {
		random := randoms[k]
		// The pair for the cost fit: the first two questions the
		// prefixgate run sent about its first document, as one client.
		var pair qaRun
		for i, r := range pg.reqs {
			if r.doc == pg.reqs[0].doc && len(pair.reqs) < 2 {
				a := pg.answers[i]
				a.client = 0
				pair.answers = append(pair.answers, a)
				pair.reqs = append(pair.reqs, r)
			}
		}
		pairFn := func(m fleetModel) *sim.Workload { return replayWorkload(t, &pair, m, 1) }
		both := [][]answer{pg.answers, random.answers}
		pgModel := phaseModel(t, fmt.Sprintf("prefixgate %d", k+1), pg.answers, both, pairFn)
		randomModel := phaseModel(t, fmt.Sprintf("random %d", k+1), random.answers, both, pairFn)
		rates[fmt.Sprintf("prefixgate %d", k+1)] = pgModel.engine.PrefillTokensPerSec
		rates[fmt.Sprintf("random %d", k+1)] = randomModel.engine.PrefillTokensPerSec
		pgRates, pgCounts := prefillByContention(pg.answers)
		randomRates, randomCounts := prefillByContention(random.answers)
		t.Logf("pair %d: fleet prefill tokens/s by replicas computing at once (1..%d): prefixgate run %.0f (prefills %v), random run %.0f (prefills %v)",
			k+1, replicas, pgRates, pgCounts, randomRates, randomCounts)

		// The replay: the fleet's placement, the simulator's engines.
		replayPG, pgByAnswer := simulateReplay(t, replayWorkload(t, pg, pgModel, 1), pg.answers)
		replayRandom, randomByAnswer := simulateReplay(t, replayWorkload(t, random, randomModel, 1), random.answers)
		t.Logf("pair %d: replay vs fleet: hit prefixgate %.3f vs %.3f, random %.3f vs %.3f; median TTFT ratio %.2f vs %.2f, mean %.2f vs %.2f; by request: prefixgate %s; random %s",
			k+1, replayPG.hit, pg.hit(), replayRandom.hit, random.hit(),
			replayPG.medianTTFT/replayRandom.medianTTFT, ms(pg.medianTTFT())/ms(random.medianTTFT()),
			replayPG.meanTTFT/replayRandom.meanTTFT, ms(pg.meanTTFT())/ms(random.meanTTFT()),
			replayBreakdown(pg.answers, pgByAnswer), replayBreakdown(random.answers, randomByAnswer))
		// Asserted per run: the replay's hit rates within 5
		// points of the fleet's on the same placement (3-4 points lower in
		// every run: a hit's question tail is rounded up to whole blocks).
		for _, c := range []struct {
			name      string
			sim, real float64
		}{{"prefixgate", replayPG.hit, pg.hit()}, {"random", replayRandom.hit, random.hit()}} {
			if math.Abs(c.sim-c.real) > 0.05 {
				t.Errorf("pair %d, replay, %s: simulated hit rate %.3f is more than 5 points from the fleet's %.3f on the same placement", k+1, c.name, c.sim, c.real)
			}
		}

		// The simulator's own policies, over placement draws.
		ownPG := simulateSeeds(t, func(draw uint64) *sim.Workload { return replayWorkload(t, pg, pgModel, draw) }, route.DefaultPolicy)
		ownRandom := simulateSeeds(t, func(draw uint64) *sim.Workload { return replayWorkload(t, random, randomModel, draw) }, "random")
		replayPGs, replayRandoms = append(replayPGs, replayPG), append(replayRandoms, replayRandom)
		ownPGs, ownRandoms = append(ownPGs, ownPG), append(ownRandoms, ownRandom)
		for _, a := range pg.answers {
			realPG.add(a)
		}
		for _, a := range random.answers {
			realRandom.add(a)
		}
	}
	replayPG, replayRandom := poolFigures(replayPGs...), poolFigures(replayRandoms...)
	simPG, simRandom := poolFigures(ownPGs...), poolFigures(ownRandoms...)
	realMedian := ms(realPG.medianTTFT()) / ms(realRandom.medianTTFT())
	realMean := ms(realPG.meanTTFT()) / ms(realRandom.meanTTFT())
	replayMedian := replayPG.medianTTFT / replayRandom.medianTTFT
	replayMean := replayPG.meanTTFT / replayRandom.meanTTFT
	t.Logf("replay of the fleet's placement vs fleet, %d pairs pooled: hit prefixgate %.3f vs %.3f, random %.3f vs %.3f; median TTFT prefixgate %.0f vs %.0f ms, random %.0f vs %.0f ms, ratio %.2f vs %.2f (%.0f%% off); mean TTFT ratio %.2f vs %.2f (%.0f%% off)",
		len(pgs), replayPG.hit, realPG.hit(), replayRandom.hit, realRandom.hit(),
		replayPG.medianTTFT, ms(realPG.medianTTFT()), replayRandom.medianTTFT, ms(realRandom.medianTTFT()), replayMedian, realMedian, 100*off(replayMedian, realMedian),
		replayMean, realMean, 100*off(replayMean, realMean))
	simMedian := simPG.medianTTFT / simRandom.medianTTFT
	simMean := simPG.meanTTFT / simRandom.meanTTFT
	t.Logf("simulator (%s) vs fleet, %d pairs pooled: hit prefixgate %.3f vs %.3f, random %.3f vs %.3f; median TTFT prefixgate %.0f vs %.0f ms, random %.0f vs %.0f ms, ratio %.2f vs %.2f (%.0f%% off); mean TTFT prefixgate %.0f vs %.0f ms, random %.0f vs %.0f ms, ratio %.2f vs %.2f (%.0f%% off)",
		simPreset, len(pgs), simPG.hit, realPG.hit(), simRandom.hit, realRandom.hit(),
		simPG.medianTTFT, ms(realPG.medianTTFT()), simRandom.medianTTFT, ms(realRandom.medianTTFT()), simMedian, realMedian, 100*off(simMedian, realMedian),
		simPG.meanTTFT, ms(realPG.meanTTFT()), simRandom.meanTTFT, ms(realRandom.meanTTFT()), simMean, realMean, 100*off(simMean, realMean))

	if slow, fast := steadyRates(rates); slow != "" {
		t.Logf("the latency comparison is skipped in this run: the %s run's replicas prefilled at %.0f tokens/s on a core of their own, under a third of the %s run's %.0f (their own timings): the machine stalled for much of that run, which no model of a run's average speed reproduces; the hit-rate checks stand",
			slow, rates[slow], fast, rates[fast])
		if math.Abs(simPG.hit-realPG.hit()) > 0.05 || simPG.hit <= simRandom.hit {
			t.Errorf("simulated hit rates prefixgate %.3f, random %.3f against the fleet's prefixgate %.3f: not within 5 points, or not ranked as the fleet's", simPG.hit, simRandom.hit, realPG.hit())
		}
		return
	}
	// Asserted on the pooled replay: the mean TTFT ratio within issue
	// 15's 20%, the median within simRatioFactor.
	if off(replayMean, realMean) > simRatioWithin {
		t.Errorf("replay: prefixgate/random mean TTFT ratio %.2f is %.0f%% off the fleet's %.2f, more than %.0f%%",
			replayMean, 100*off(replayMean, realMean), realMean, 100*simRatioWithin)
	}
	if replayMedian > simRatioFactor*realMedian || realMedian > simRatioFactor*replayMedian {
		t.Errorf("replay: prefixgate/random median TTFT ratio %.2f is more than %.0f× off the fleet's %.2f", replayMedian, simRatioFactor, realMedian)
	}
	// Asserted on the simulator's own policies: prefixgate's hit within
	// 5 points (random's is one draw per run on the fleet, about ±7 points
	// between runs of 60 requests, against the simulator's mean over
	// draws: logged), the median TTFT ratio within simRatioFactor, and the
	// same verdict as the fleet's.
	if math.Abs(simPG.hit-realPG.hit()) > 0.05 {
		t.Errorf("prefixgate: simulated hit rate %.3f is more than 5 points from the fleet's %.3f", simPG.hit, realPG.hit())
	}
	if simMedian > simRatioFactor*realMedian || realMedian > simRatioFactor*simMedian {
		t.Errorf("prefixgate/random median TTFT: simulated %.2f is more than %.0f× off the fleet's %.2f",
			simMedian, simRatioFactor, realMedian)
	}
	if simPG.hit <= simRandom.hit || simMedian >= 1 {
		t.Errorf("the simulator does not rank prefixgate above random as the fleet does: hit %.3f vs %.3f, median TTFT ratio %.2f",
			simPG.hit, simRandom.hit, simMedian)
	}
	t.Logf("targets: replay: TTFT ratio within 20%%: mean %v (asserted), median %v; own policies: hit within 5 points: prefixgate %v, random %v; TTFT ratio within 20%%: median %v, mean %v",
		off(replayMean, realMean) <= simRatioWithin, off(replayMedian, realMedian) <= simRatioWithin,
		math.Abs(simPG.hit-realPG.hit()) <= 0.05, math.Abs(simRandom.hit-realRandom.hit()) <= 0.05,
		off(simMedian, realMedian) <= simRatioWithin, off(simMean, realMean) <= simRatioWithin)
}

// steadyRates returns the slowest and fastest of the runs' single-core
// prefill rates (fitFleet, from the replicas' own timings) when the slowest
// is under a third of the fastest, and empty names when the runs are
// steady. A load that slows one run evenly is in its model (phaseModel:
// runs at 2,373 against 4,820 and 2,950 against 4,824 tokens/s compared
// within 4% and 17% on the mean ratio); one that stalls a run for seconds
// is not: at 594 tokens/s against 4,629 (load average 8.7, the run's first
// prefills eight times slower than its later requests) the replay's median
// ratio came out 2.5× off, at 313 against 4,916 3.9× off.
func steadyRates(rates map[string]float64) (slow, fast string) {
	for name, r := range rates {
		if slow == "" || r < rates[slow] || (r == rates[slow] && name < slow) {
			slow = name
		}
		if fast == "" || r > rates[fast] || (r == rates[fast] && name < fast) {
			fast = name
		}
	}
	if rates[slow] >= rates[fast]/3 {
		return "", ""
	}
	return slow, fast
}

// chatWorkload turns a real multi-turn run into a simulator workload: each
// turn with the messages it carried, sent by the same client in the same
// order, closed-loop (closeLoop: a client's next turn or next conversation
// starts when its previous simulated answer ends). The pasted
// document is its document's token stream; every other message is a stream
// of its own, the same in every later turn of its conversation, as long as
// its text (see simCharsPerToken).
func chatWorkload(t *testing.T, turns []chatTurn, m fleetModel, draw uint64) *sim.Workload {
	docs := documents(numDocs)
	w := &sim.Workload{Name: "llamafleet-chats", Replicas: replicas, Engine: simEngine(m.engine), Cores: m.cores}
	start := turns[0].sent
	for _, tr := range turns {
		if tr.sent.Before(start) {
			start = tr.sent
		}
	}
	var as []answer
	for _, tr := range turns {
		as = append(as, tr.answer)
	}
	place := placement(t, as)
	var clients []int
	for i, tr := range turns {
		clients = append(clients, tr.client)
		r := &sim.Request{At: tr.sent.Sub(start), Output: maxTokens, Placed: true, Replica: place[i]}
		for k, m := range tr.msgs {
			id := segID(draw, uint64(1<<32)+uint64(tr.conv)<<16+uint64(k))
			var segs []sim.Segment
			n := len(m.Content)
			if k == 0 {
				segs = append(segs, sim.Segment{ID: segID(draw, uint64(tr.doc)+1), Tokens: simTokens(len(docs[tr.doc]))})
				n -= len(docs[tr.doc])
			}
			segs = append(segs, sim.Segment{ID: id, Tokens: simTokens(n)})
			r.Messages = append(r.Messages, sim.Message{Role: m.Role, Content: segs})
		}
		w.Requests = append(w.Requests, r)
	}
	closeLoop(t, w.Requests, clients)
	sort.SliceStable(w.Requests, func(i, j int) bool { return w.Requests[i].At < w.Requests[j].At })
	return w
}

// compareSimulatorChats replays the real multi-turn runs through the
// simulator and compares hit rates. The simulator keys chats with the same
// normalize code as serve and routes with the same policy. With
// prefix-index the default, both keep every conversation on one replica:
// prefixgate's simulated hit must be within 5 points of the
// fleet's (0.704 against 0.723). With the stateless ring every turn lands
// on a new home, the fleet's figure moved from 0.20 to 0.35 over six runs
// (its ring is laid over random ports, the simulator's over fixed names),
// and only 20 points are asserted: enough to catch a replay that measures
// text in tokens instead of characters (0.72 against 0.31). Random's
// 5 points are logged: with 8 conversations on 4 replicas, which
// conversations share a replica is one draw on the fleet. The replay
// policy takes that draw from the fleet (as compareSimulator does), and
// its hit rates are asserted within 5 points for both runs.
func compareSimulatorChats(t *testing.T, pg, random *chatFigures) {
	// The pair for the cost fit: the first two turns of the prefixgate
	// run's first conversation, as one client.
	var pair []chatTurn
	for _, tr := range pg.turns {
		if tr.conv == pg.turns[0].conv && len(pair) < 2 {
			tr.client = 0
			pair = append(pair, tr)
		}
	}
	pairFn := func(m fleetModel) *sim.Workload { return chatWorkload(t, pair, m, 1) }
	both := [][]answer{pg.all.answers, random.all.answers}
	pgModel := phaseModel(t, "prefixgate", pg.all.answers, both, pairFn)
	randomModel := phaseModel(t, "random", random.all.answers, both, pairFn)
	simulate := func(f *chatFigures, m fleetModel, policy string) simFigures {
		return simulateSeeds(t, func(draw uint64) *sim.Workload { return chatWorkload(t, f.turns, m, draw) }, policy)
	}
	simPG := simulate(pg, pgModel, route.DefaultPolicy)
	simRandom := simulate(random, randomModel, "random")
	realMedian := ms(pg.all.medianTTFT()) / ms(random.all.medianTTFT())
	simMedian := simPG.medianTTFT / simRandom.medianTTFT
	realMean := ms(pg.all.meanTTFT()) / ms(random.all.meanTTFT())
	simMean := simPG.meanTTFT / simRandom.meanTTFT
	t.Logf("simulator (%s) vs fleet, multi-turn, all turns: hit prefixgate %.3f vs %.3f, random %.3f vs %.3f; median TTFT prefixgate %.0f vs %.0f ms, random %.0f vs %.0f ms, ratio %.2f vs %.2f (%.0f%% off); mean TTFT prefixgate %.0f vs %.0f ms, random %.0f vs %.0f ms, ratio %.2f vs %.2f (%.0f%% off)",
		simPreset, simPG.hit, pg.all.hit(), simRandom.hit, random.all.hit(),
		simPG.medianTTFT, ms(pg.all.medianTTFT()), simRandom.medianTTFT, ms(random.all.medianTTFT()), simMedian, realMedian, 100*off(simMedian, realMedian),
		simPG.meanTTFT, ms(pg.all.meanTTFT()), simRandom.meanTTFT, ms(random.all.meanTTFT()), simMean, realMean, 100*off(simMean, realMean))
	replayPG, pgByAnswer := simulateReplay(t, chatWorkload(t, pg.turns, pgModel, 1), pg.all.answers)
	replayRandom, randomByAnswer := simulateReplay(t, chatWorkload(t, random.turns, randomModel, 1), random.all.answers)
	t.Logf("replay vs fleet by request, multi-turn: prefixgate %s; random %s", replayBreakdown(pg.all.answers, pgByAnswer), replayBreakdown(random.all.answers, randomByAnswer))
	replayMedian := replayPG.medianTTFT / replayRandom.medianTTFT
	replayMean := replayPG.meanTTFT / replayRandom.meanTTFT
	t.Logf("replay of the fleet's placement vs fleet, multi-turn: hit prefixgate %.3f vs %.3f, random %.3f vs %.3f; median TTFT prefixgate %.0f vs %.0f ms, random %.0f vs %.0f ms, ratio %.2f vs %.2f (%.0f%% off); mean TTFT ratio %.2f vs %.2f (%.0f%% off)",
		replayPG.hit, pg.all.hit(), replayRandom.hit, random.all.hit(),
		replayPG.medianTTFT, ms(pg.all.medianTTFT()), replayRandom.medianTTFT, ms(random.all.medianTTFT()), replayMedian, realMedian, 100*off(replayMedian, realMedian),
		replayMean, realMean, 100*off(replayMean, realMean))
	// Asserted on the replay: both hit rates within 5 points
	// (2-3 points lower in every run). Its TTFT ratios are logged: 32
	// turns a run, and the mean was within 20% in 7 of 10 runs, the median
	// in 6, while another job loaded the machine (docs/backends.md).
	for _, c := range []struct {
		name      string
		sim, real float64
	}{{"prefixgate", replayPG.hit, pg.all.hit()}, {"random", replayRandom.hit, random.all.hit()}} {
		if math.Abs(c.sim-c.real) > 0.05 {
			t.Errorf("multi-turn replay, %s: simulated hit rate %.3f is more than 5 points from the fleet's %.3f on the same placement", c.name, c.sim, c.real)
		}
	}
	t.Logf("targets, multi-turn: replay: hit within 5 points %v, TTFT ratio within 20%%: median %v, mean %v; own policies: hit within 5 points: prefixgate %v, random %v; TTFT ratio within 20%%: median %v, mean %v",
		math.Abs(replayPG.hit-pg.all.hit()) <= 0.05 && math.Abs(replayRandom.hit-random.all.hit()) <= 0.05,
		off(replayMedian, realMedian) <= simRatioWithin, off(replayMean, realMean) <= simRatioWithin,
		math.Abs(simPG.hit-pg.all.hit()) <= 0.05, math.Abs(simRandom.hit-random.all.hit()) <= 0.05,
		off(simMedian, realMedian) <= simRatioWithin, off(simMean, realMean) <= simRatioWithin)
	within := 0.20
	if defaultIndexesBlocks {
		within = 0.05
	}
	if math.Abs(simPG.hit-pg.all.hit()) > within {
		t.Errorf("multi-turn prefixgate: simulated hit rate %.3f is more than %.0f points from the fleet's %.3f", simPG.hit, 100*within, pg.all.hit())
	}
}
