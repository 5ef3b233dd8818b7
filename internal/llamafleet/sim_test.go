package llamafleet

import (
	"fmt"
	"math"
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

// replayWorkload turns a real document-QA run into a simulator workload:
// the same requests at the same offsets from the first send, each document
// one token stream and each question its own, as long as their text plus
// the system message's preamble (see simCharsPerToken).
func replayWorkload(run *qaRun, engine vllmsim.EngineConfig) *sim.Workload {
	docs := documents(numDocs)
	w := &sim.Workload{Name: "llamafleet-docqa", Replicas: replicas, Engine: engine}
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
				{Role: "system", Content: []sim.Segment{{ID: uint64(r.doc) + 1, Tokens: simTokens(len(docs[r.doc]) + 33)}}},
				{Role: "user", Content: []sim.Segment{{ID: uint64(1000 + i), Tokens: simTokens(len(q))}}},
			},
			Output: maxTokens,
		})
	}
	sort.SliceStable(w.Requests, func(i, j int) bool { return w.Requests[i].At < w.Requests[j].At })
	return w
}

// compareSimulator replays the real prefixgate and random runs through the
// simulator with the fleet's preset and compares hit rates and the
// prefixgate / random latency ratio (time to first token) with the real ones.
func compareSimulator(t *testing.T, pg, random *qaRun) {
	preset, err := vllmsim.LookupPreset(simPreset)
	if err != nil {
		t.Fatal(err)
	}
	// The preset's rates were measured on an idle machine; the fleet in
	// this test shares the machine's cores, so the engine model takes the
	// rates the replicas reported in this run.
	engine := preset.Engine
	var promptN, decodeN int
	var promptMS, decodeMS float64
	for _, run := range []*qaRun{pg, random} {
		for _, a := range run.answers {
			if a.promptN > 100 { // prefills, not cache hits with a short tail
				promptN += a.promptN
				promptMS += a.promptMS
			}
			decodeN += a.decodeN
			decodeMS += float64(a.decode) / float64(time.Millisecond)
		}
	}
	if promptN == 0 || decodeN == 0 {
		t.Fatal("llama-server reported no timings (timings.prompt_n, timings.predicted_n)")
	}
	engine.PrefillTokensPerSec = float64(promptN) / (promptMS / 1000)
	engine.DecodeStepBase = time.Duration(decodeMS / float64(decodeN) * float64(time.Millisecond))
	// The per-request cost (PrefillOverhead: the saved prompt's restore
	// from RAM, the short tail's poor rate) is the preset's, measured on
	// an idle core, slowed as the prefill rate is: on shared cores the
	// fleet's processes get a share of a core for all their work. Measured
	// per run it is not usable: a cache hit's time beyond its tail at the
	// run's rate went from -53 to 78 ms (llama-server's prompt timing) and
	// from -10 to 134 ms (from the client) over runs at load average 10-28,
	// so it is logged for the record, not replayed.
	engine.PrefillOverhead = time.Duration(float64(preset.Engine.PrefillOverhead) * preset.Engine.PrefillTokensPerSec / engine.PrefillTokensPerSec)
	var extra, inServer []float64
	for _, run := range []*qaRun{pg, random} {
		for _, a := range run.answers {
			if a.promptN > 0 && a.promptN <= 100 {
				tail := 1000 * float64(a.promptN) / engine.PrefillTokensPerSec
				extra = append(extra, float64(a.latency-a.decode)/float64(time.Millisecond)-tail)
				inServer = append(inServer, a.promptMS-tail)
			}
		}
	}
	if len(extra) > 0 {
		sort.Float64s(extra)
		sort.Float64s(inServer)
		t.Logf("%d cache hits' time beyond their tail at this run's rate: median %.1f ms from the client (lower quartile %.1f ms), %.1f ms in llama-server's prompt timing",
			len(extra), extra[len(extra)/2], extra[len(extra)/4], inServer[len(inServer)/2])
	}
	t.Logf("fleet rates in this run: prefill %.0f tokens/s (preset %.0f), decode step %v (preset %v), prefill overhead %v (preset %v)",
		engine.PrefillTokensPerSec, preset.Engine.PrefillTokensPerSec, engine.DecodeStepBase.Round(100*time.Microsecond), preset.Engine.DecodeStepBase,
		engine.PrefillOverhead.Round(100*time.Microsecond), preset.Engine.PrefillOverhead)
	simulateWith := func(engine vllmsim.EngineConfig, run *qaRun, policy string) sim.PolicyResult {
		rep, err := sim.Simulate(replayWorkload(run, simEngine(engine)), sim.Options{
			Replicas: replicas, Policies: []string{policy}, Seed: 1, Parallel: 1,
		})
		if err != nil {
			t.Fatalf("simulate %s: %v", policy, err)
		}
		return rep.Policies[0]
	}
	simulate := func(run *qaRun, policy string) sim.PolicyResult { return simulateWith(engine, run, policy) }
	simPG := simulate(pg, route.DefaultPolicy)
	simRandom := simulate(random, "random")
	realRatio := float64(pg.medianTTFT()) / float64(random.medianTTFT())
	simRatio := simPG.TTFT.P50 / simRandom.TTFT.P50
	// The same replay without the per-request cost, for the record: how
	// much of the match the overhead accounts for.
	bare := engine
	bare.PrefillOverhead = 0
	bareRatio := simulateWith(bare, pg, route.DefaultPolicy).TTFT.P50 / simulateWith(bare, random, "random").TTFT.P50
	t.Logf("without the prefill overhead the simulated prefixgate/random TTFT ratio is %.2f (%.0f%% off the fleet's %.2f)",
		bareRatio, 100*math.Abs(bareRatio-realRatio)/realRatio, realRatio)
	t.Logf("simulator (%s) vs fleet: hit prefixgate %.3f vs %.3f, random %.3f vs %.3f; median TTFT prefixgate %.0f ms vs %v, random %.0f ms vs %v; prefixgate/random %.2f vs %.2f",
		simPreset, simPG.HitRate, pg.hit(), simRandom.HitRate, random.hit(),
		simPG.TTFT.P50, pg.medianTTFT().Round(time.Millisecond), simRandom.TTFT.P50, random.medianTTFT().Round(time.Millisecond),
		simRatio, realRatio)
	// What the simulator gets right on this fleet, asserted: prefixgate's
	// hit rate within issue 15's 5 points of the fleet's (with prefix-index
	// the default: 0.719 against 0.750 in every run so far; the fleet
	// reaches the per-document ideal, the replay spills a few requests
	// when its open-loop arrivals queue), and the same verdict (more hits
	// and a shorter median TTFT than the cache-blind balancer).
	if math.Abs(simPG.HitRate-pg.hit()) > 0.05 {
		t.Errorf("prefixgate: simulated hit rate %.3f is more than 5 points from the fleet's %.3f", simPG.HitRate, pg.hit())
	}
	if simPG.HitRate <= simRandom.HitRate || simRatio >= 1 {
		t.Errorf("the simulator does not rank prefixgate above random as the fleet does: hit %.3f vs %.3f, TTFT ratio %.2f",
			simPG.HitRate, simRandom.HitRate, simRatio)
	}
	// Where it does not yet match every run (random's hit rate within 5
	// points: random placement moves by about 7 points between runs of 60
	// requests; the latency ratio within 20%: the fleet's own ratio moves
	// from 0.18 to 0.38 between runs on shared cores, and the open-loop
	// replay at the fleet's send times queues where the closed-loop
	// clients waited), logged for the record and docs/benchmarks.md.
	t.Logf("issue 15 targets: hit within 5 points: prefixgate %v, random %v (%.3f vs %.3f); TTFT ratio within 20%%: %v (%s off)",
		math.Abs(simPG.HitRate-pg.hit()) <= 0.05, math.Abs(simRandom.HitRate-random.hit()) <= 0.05, simRandom.HitRate, random.hit(),
		math.Abs(simRatio-realRatio)/realRatio <= 0.2, fmt.Sprintf("%.0f%%", 100*math.Abs(simRatio-realRatio)/realRatio))
}

// chatWorkload turns a real multi-turn run into a simulator workload: each
// turn at its real send offset with the messages it carried. The pasted
// document is its document's token stream; every other message is a stream
// of its own, the same in every later turn of its conversation, as long as
// its text (see simCharsPerToken).
func chatWorkload(turns []chatTurn, engine vllmsim.EngineConfig) *sim.Workload {
	docs := documents(numDocs)
	w := &sim.Workload{Name: "llamafleet-chats", Replicas: replicas, Engine: engine}
	start := turns[0].sent
	for _, tr := range turns {
		if tr.sent.Before(start) {
			start = tr.sent
		}
	}
	for _, tr := range turns {
		r := &sim.Request{At: tr.sent.Sub(start), Output: maxTokens}
		for k, m := range tr.msgs {
			id := uint64(1<<32) + uint64(tr.conv)<<16 + uint64(k)
			var segs []sim.Segment
			n := len(m.Content)
			if k == 0 {
				segs = append(segs, sim.Segment{ID: uint64(tr.doc) + 1, Tokens: simTokens(len(docs[tr.doc]))})
				n -= len(docs[tr.doc])
			}
			segs = append(segs, sim.Segment{ID: id, Tokens: simTokens(n)})
			r.Messages = append(r.Messages, sim.Message{Role: m.Role, Content: segs})
		}
		w.Requests = append(w.Requests, r)
	}
	sort.SliceStable(w.Requests, func(i, j int) bool { return w.Requests[i].At < w.Requests[j].At })
	return w
}

// compareSimulatorChats replays the real multi-turn runs through the
// simulator and compares hit rates. The simulator keys chats with the same
// normalize code as serve and routes with the same policy. With
// prefix-index the default, both keep every conversation on one replica:
// prefixgate's simulated hit must be within issue 15's 5 points of the
// fleet's (0.704 against 0.723). With the stateless ring every turn lands
// on a new home, the fleet's figure moved from 0.20 to 0.35 over six runs
// (its ring is laid over random ports, the simulator's over fixed names),
// and only 20 points are asserted: enough to catch a replay that measures
// text in tokens instead of characters (0.72 against 0.31). Random's
// 5 points is logged.
func compareSimulatorChats(t *testing.T, pg, random *chatFigures) {
	preset, err := vllmsim.LookupPreset(simPreset)
	if err != nil {
		t.Fatal(err)
	}
	simulate := func(f *chatFigures, policy string) sim.PolicyResult {
		rep, err := sim.Simulate(chatWorkload(f.turns, simEngine(preset.Engine)), sim.Options{
			Replicas: replicas, Policies: []string{policy}, Seed: 1, Parallel: 1,
		})
		if err != nil {
			t.Fatalf("simulate %s: %v", policy, err)
		}
		return rep.Policies[0]
	}
	simPG := simulate(pg, route.DefaultPolicy)
	simRandom := simulate(random, "random")
	t.Logf("simulator (%s) vs fleet, multi-turn, all turns: hit prefixgate %.3f vs %.3f, random %.3f vs %.3f; within 5 points: prefixgate %v, random %v",
		simPreset, simPG.HitRate, pg.all.hit(), simRandom.HitRate, random.all.hit(),
		math.Abs(simPG.HitRate-pg.all.hit()) <= 0.05, math.Abs(simRandom.HitRate-random.all.hit()) <= 0.05)
	within := 0.20
	if routeV2Default {
		within = 0.05
	}
	if math.Abs(simPG.HitRate-pg.all.hit()) > within {
		t.Errorf("multi-turn prefixgate: simulated hit rate %.3f is more than %.0f points from the fleet's %.3f", simPG.HitRate, 100*within, pg.all.hit())
	}
}
