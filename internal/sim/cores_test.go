package sim

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestSharedCores: four prefills at once on four replicas take twice as
// long on two shared cores as on a core each, and as long as on a core
// each when the machine has four; one prefill alone is never slowed.
func TestSharedCores(t *testing.T) {
	run := func(n int, cores float64) []float64 {
		w := placedWorkload(t, func(i int) int { return i % 4 })
		w.Requests = w.Requests[:n]
		for _, r := range w.Requests {
			r.At = 0
		}
		w.Cores = cores
		rep, err := Simulate(w, Options{Policies: []string{ReplayPolicy}, Parallel: 1})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Policies[0].RequestTTFTs
	}
	own, two, four := run(4, 0), run(4, 2), run(4, 4)
	alone, aloneTwo := run(1, 0), run(1, 2)
	for i := range own {
		if math.Abs(two[i]-2*own[i]) > 0.01*own[i] {
			t.Errorf("request %d: %.2f ms on 2 shared cores, want twice %.2f ms", i, two[i], own[i])
		}
		if math.Abs(four[i]-own[i]) > 1e-6 {
			t.Errorf("request %d: %.2f ms on 4 shared cores, want %.2f ms as on a core each", i, four[i], own[i])
		}
	}
	if math.Abs(aloneTwo[0]-alone[0]) > 1e-6 {
		t.Errorf("one request: %.2f ms on 2 shared cores, want %.2f ms", aloneTwo[0], alone[0])
	}
}

// TestSharedCoresSpeedChange: a prefill that starts alone and is joined
// halfway by three others runs its second half at half speed.
func TestSharedCoresSpeedChange(t *testing.T) {
	w := placedWorkload(t, func(i int) int { return i % 4 })
	w.Requests = w.Requests[:4]
	rep, err := Simulate(w, Options{Policies: []string{ReplayPolicy}, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	alone := rep.Policies[0].RequestTTFTs[0]
	w = placedWorkload(t, func(i int) int { return i % 4 })
	w.Requests = w.Requests[:4]
	w.Requests[0].At = 0
	for _, r := range w.Requests[1:] {
		r.At = w.Requests[0].At + msDuration(alone/2)
	}
	w.Cores = 2
	rep, err = Simulate(w, Options{Policies: []string{ReplayPolicy}, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Half alone at full speed, the other half at 2/4.
	if got, want := rep.Policies[0].RequestTTFTs[0], 1.5*alone; math.Abs(got-want) > 0.01*want {
		t.Errorf("first request: %.2f ms, want %.2f ms (half alone, half at half speed)", got, want)
	}
}

func TestSharedCoresErrors(t *testing.T) {
	for _, c := range []float64{-1, math.NaN(), math.Inf(1)} {
		w := placedWorkload(t, func(i int) int { return i % 4 })
		w.Cores = c
		if _, err := Simulate(w, Options{Policies: []string{"random"}}); err == nil || !strings.Contains(err.Error(), "cores") {
			t.Errorf("cores %v: err %v, want one naming cores", c, err)
		}
	}
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
