package sim

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/route"
)

// TestSweepReachesSaturation: random routing on long-context at 4× the base
// rate overloads the fleet, so its TTFT p90 is far above the half-rate one;
// the sustainable rate follows from the p90s.
func TestSweepReachesSaturation(t *testing.T) {
	rep := small(t, Options{Workload: "long-context", Requests: 600, Rates: []float64{4, 0.5}, Policies: []string{"random", "sglang-cache-aware"}})
	if len(rep.Sweep) != 2 || rep.Sweep[0].Rate != 0.5 || rep.Sweep[1].Rate != 4 {
		t.Fatalf("sweep rates %v", rep.Sweep)
	}
	lo, hi := rep.Sweep[0].Policies[0], rep.Sweep[1].Policies[0]
	t.Logf("random p90 %.0f ms at 0.5×, %.0f ms at 4×; out tok/s %.0f, %.0f", lo.TTFT.P90, hi.TTFT.P90, lo.OutputTokensPerSec, hi.OutputTokensPerSec)
	if hi.TTFT.P90 < 10*lo.TTFT.P90 {
		t.Errorf("random p90 at 4× (%.0f ms) not 10× its p90 at 0.5× (%.0f ms): no saturation", hi.TTFT.P90, lo.TTFT.P90)
	}
	if hi.Goodput >= lo.Goodput {
		t.Errorf("goodput did not fall with load: %.3f at 0.5×, %.3f at 4×", lo.Goodput, hi.Goodput)
	}
	if hi.OutputTokensPerSec <= lo.OutputTokensPerSec {
		t.Errorf("output tok/s did not grow with the rate: %.0f, %.0f", lo.OutputTokensPerSec, hi.OutputTokensPerSec)
	}
	for _, pt := range rep.Sweep {
		for _, p := range pt.Policies {
			x := rep.SustainableRate[p.Name]
			within := p.TTFT.P90 <= rep.SLO
			if within && (x == nil || *x < pt.Rate) || x != nil && *x == pt.Rate && !within {
				t.Errorf("%s at %g: p90 %.0f ms, SLO %.0f, sustainable %v", p.Name, pt.Rate, p.TTFT.P90, rep.SLO, x)
			}
		}
	}
	if rep.Rate != 0.5 || len(rep.Policies) != 2 || rep.Policies[0].TTFT != lo.TTFT {
		t.Error("top-level fields are not the lowest rate's run")
	}
}

func TestSweepJSON(t *testing.T) {
	rep := small(t, Options{Workload: "zipf", Requests: 300, Rates: []float64{1, 2}, Policies: []string{"random", "vllm-prefixaware", "oracle"}, SLO: 50 * time.Millisecond})
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var m struct {
		DefaultPolicy   string              `json:"default_policy"`
		SLO             float64             `json:"slo_ms"`
		Policies        []map[string]any    `json:"policies"`
		SustainableRate map[string]*float64 `json:"sustainable_rate"`
		Sweep           []struct {
			Rate     float64          `json:"rate"`
			Policies []map[string]any `json:"policies"`
		} `json:"sweep"`
	}
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m.DefaultPolicy != route.DefaultPolicy || m.SLO != 50 {
		t.Errorf("default_policy %q slo_ms %v", m.DefaultPolicy, m.SLO)
	}
	roles := map[string]string{"random": "route", "vllm-prefixaware": "peer", "oracle": "oracle"}
	for _, p := range m.Policies {
		if p["role"] != roles[p["name"].(string)] {
			t.Errorf("%v has role %v", p["name"], p["role"])
		}
	}
	if len(m.Sweep) != 2 || m.Sweep[0].Rate != 1 || m.Sweep[1].Rate != 2 {
		t.Fatalf("sweep %+v", m.Sweep)
	}
	for _, pt := range m.Sweep {
		for _, p := range pt.Policies {
			for _, k := range []string{"name", "role", "hit_rate", "ttft_ms", "throughput_rps", "output_tokens_per_s", "goodput", "goodput_rps", "share"} {
				if _, ok := p[k]; !ok {
					t.Errorf("rate %g %v: no %s", pt.Rate, p["name"], k)
				}
			}
			g, tput, gr := p["goodput"].(float64), p["throughput_rps"].(float64), p["goodput_rps"].(float64)
			if g < 0 || g > 1 || gr > tput*1.0000001 || p["output_tokens_per_s"].(float64) <= 0 {
				t.Errorf("rate %g %v: goodput %v, goodput_rps %v, throughput %v", pt.Rate, p["name"], g, gr, tput)
			}
		}
	}
	if got := len(m.SustainableRate); got != 3 {
		t.Errorf("sustainable_rate has %d policies", got)
	}
}

func TestPolicyNamesAndRoles(t *testing.T) {
	for _, p := range route.Policies() {
		if !slices.Contains(PolicyNames, p) || PolicyRole(p) != RoleRoute {
			t.Errorf("route policy %s: listed %v, role %s", p, slices.Contains(PolicyNames, p), PolicyRole(p))
		}
	}
	for _, p := range peerOrder {
		if !slices.Contains(PolicyNames, p) || PolicyRole(p) != RolePeer {
			t.Errorf("peer %s: listed %v, role %s", p, slices.Contains(PolicyNames, p), PolicyRole(p))
		}
	}
	if PolicyRole(oraclePolicy) != RoleOracle || PolicyNames[len(PolicyNames)-1] != oraclePolicy {
		t.Error("the oracle is not last or not the oracle")
	}
	if !slices.Contains(PolicyNames, route.DefaultPolicy) {
		t.Errorf("the default policy %s is not simulated", route.DefaultPolicy)
	}
}

// TestMultiTurnTurnsFollowAnswers: a turn arrives exactly its think time
// after the previous turn's answer came back in the same run, and carries
// that answer's tokens.
func TestMultiTurnTurnsFollowAnswers(t *testing.T) {
	w, err := BuildWorkloadRate("multi-turn", 400, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := BuildWorkloadRate("multi-turn", 400, 3, 4)
	prev := map[*Request]*Request{}
	follows := 0
	for i, r := range w.Requests {
		if !slices.EqualFunc(r.Messages, again.Requests[i].Messages, func(a, b Message) bool { return a.Role == b.Role && slices.Equal(a.Content, b.Content) }) {
			t.Fatal("two builds with one seed differ")
		}
		if r.next != nil {
			prev[r.next] = r
			nx := r.next
			k := len(r.Messages)
			if len(nx.Messages) != k+2 || nx.Messages[k].Role != "assistant" || segTokens(nx.Messages[k].Content) != r.Output ||
				!slices.EqualFunc(nx.Messages[:k], r.Messages, func(a, b Message) bool { return a.Role == b.Role && slices.Equal(a.Content, b.Content) }) {
				t.Fatalf("turn %d does not carry the previous prompt and its %d-token answer", i, r.Output)
			}
		}
		if r.follows {
			follows++
		}
	}
	if follows == 0 || len(prev) != follows {
		t.Fatalf("%d following turns, %d linked", follows, len(prev))
	}
	f, err := newFleet(w, Options{Replicas: 7, Routers: 1, Seed: 1, SLO: DefaultSLO, Threshold: route.DefaultThreshold, LoadFactor: route.DefaultLoadFactor, Slack: route.DefaultSlack}, "random", nil, func() {})
	if err != nil {
		t.Fatal(err)
	}
	finished := map[*Request]time.Time{}
	arrived := map[*Request]time.Duration{}
	f.onFinish = func(fl *flight, at time.Time) {
		finished[fl.req] = at
		arrived[fl.req] = fl.at
	}
	if _, err := f.run(); err != nil {
		t.Fatal(err)
	}
	late := 0
	for r, p := range prev {
		want := finished[p].Sub(epoch) + r.Think
		if arrived[r] != want {
			t.Fatalf("a turn arrived at %v, want its previous answer's %v + think %v", arrived[r], finished[p].Sub(epoch), r.Think)
		}
		if arrived[r] > r.At {
			late++
		}
	}
	t.Logf("%d of %d following turns arrived later than their nominal time (answers slower than the guess)", late, len(prev))
}
