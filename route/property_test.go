package route

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// keys returns n pseudo-random keys, the same every run.
func keys(n int) []uint64 {
	ks := make([]uint64, n)
	for i := range ks {
		ks[i] = splitmix(uint64(i) * 0x9e3779b97f4a7c15)
	}
	return ks
}

// TestBalanceSevenBackends measures the default VirtualNodes: every backend's
// share of the ring, exactly (arc lengths) and over 100k sampled keys, must
// be within ±5% of 1/7. It checks several fleets' naming schemes, since the
// shares depend on the names.
func TestBalanceSevenBackends(t *testing.T) {
	ks := keys(100_000)
	for _, scheme := range []string{"vllm-%d", "10.0.0.%d:8000", "replica-%d.llama-70b.svc", "gpu-node-%02d"} {
		t.Run(scheme, func(t *testing.T) {
			ms := make([]Member, 7)
			for i := range ms {
				ms[i] = Member{Name: fmt.Sprintf(scheme, i+1)}
			}
			r := mustNew(t, Config{}, ms)
			count := map[string]int{}
			for _, k := range ks {
				count[r.Home(k)]++
			}
			worstArc, worstSample := 0.0, 0.0
			for _, st := range r.Status() {
				arc := st.Share*7 - 1
				sample := float64(count[st.Name])/float64(len(ks))*7 - 1
				worstArc = max(worstArc, math.Abs(arc))
				worstSample = max(worstSample, math.Abs(sample))
				t.Logf("%-28s ring share %.4f (%+.2f%%)  sampled %.4f (%+.2f%%)", st.Name, st.Share, arc*100, float64(count[st.Name])/float64(len(ks)), sample*100)
			}
			t.Logf("worst deviation from 1/7: ring %.2f%%, sampled %.2f%%", worstArc*100, worstSample*100)
			if worstArc > 0.05 || worstSample > 0.05 {
				t.Errorf("share deviates from 1/7 by ring %.2f%% / sampled %.2f%%, want within 5%%", worstArc*100, worstSample*100)
			}
		})
	}
}

// TestMembershipMovement: adding one backend to n moves at most 1.1/(n+1) of
// the keys, all to the new backend; removing one moves only its own keys, at
// most 1.1/n of them.
func TestMembershipMovement(t *testing.T) {
	ks := keys(100_000)
	for _, n := range []int{3, 7, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ms := fleet(n + 1)
			r := mustNew(t, Config{}, ms[:n])
			before := make([]string, len(ks))
			for i, k := range ks {
				before[i] = r.Home(k)
			}
			if err := r.SetMembers(ms); err != nil {
				t.Fatal(err)
			}
			added := ms[n].Name
			moved := 0
			for i, k := range ks {
				if h := r.Home(k); h != before[i] {
					moved++
					if h != added {
						t.Fatalf("key %x moved from %s to %s, not to the added %s", k, before[i], h, added)
					}
				}
			}
			frac := float64(moved) / float64(len(ks))
			t.Logf("add 1 to %d: moved %.4f of keys (1/(n+1) = %.4f)", n, frac, 1/float64(n+1))
			if frac > 1.1/float64(n+1) {
				t.Errorf("adding moved %.4f of keys, want <= %.4f", frac, 1.1/float64(n+1))
			}

			// Remove a member other than the one just added.
			gone := ms[n/2].Name
			rest := slices.DeleteFunc(slices.Clone(ms), func(m Member) bool { return m.Name == gone })
			withAll := make([]string, len(ks))
			for i, k := range ks {
				withAll[i] = r.Home(k)
			}
			if err := r.SetMembers(rest); err != nil {
				t.Fatal(err)
			}
			moved = 0
			for i, k := range ks {
				if h := r.Home(k); h != withAll[i] {
					moved++
					if withAll[i] != gone {
						t.Fatalf("key %x moved from %s to %s though %s was removed", k, withAll[i], h, gone)
					}
				} else if h == gone {
					t.Fatalf("key %x still on removed %s", k, gone)
				}
			}
			frac = float64(moved) / float64(len(ks))
			t.Logf("remove 1 of %d: moved %.4f of keys (1/n = %.4f)", n+1, frac, 1/float64(n+1))
			if frac > 1.1/float64(n+1) {
				t.Errorf("removing moved %.4f of keys, want <= %.4f", frac, 1.1/float64(n+1))
			}
		})
	}
}

// TestEjectedKeysReturn: ejecting a backend moves only its keys, and they
// come back when it is healthy again (the ring is not rebuilt).
func TestEjectedKeysReturn(t *testing.T) {
	ks := keys(20_000)
	r := mustNew(t, Config{VirtualNodes: 256}, fleet(5))
	before := make([]string, len(ks))
	for i, k := range ks {
		before[i] = r.Home(k)
	}
	for _, h := range []string{"ejected", "draining"} {
		setHealthy(r, "vllm-2", false)
		for i, k := range ks {
			got, err := r.TryPick(Request{Key: k})
			if err != nil {
				t.Fatal(err)
			}
			got.Done()
			if got.Backend == "vllm-2" {
				t.Fatalf("%v backend picked", h)
			}
			if before[i] != "vllm-2" && got.Backend != before[i] {
				t.Fatalf("key %x moved from %s to %s though only vllm-2 is %v", k, before[i], got.Backend, h)
			}
		}
		setHealthy(r, "vllm-2", true)
		for i, k := range ks {
			if got := r.Home(k); got != before[i] {
				t.Fatalf("after recovery key %x on %s, want %s", k, got, before[i])
			}
		}
	}
}

// TestModelCandidates: only members serving the model (or serving all) are
// picked; a model nobody serves is ErrNoCandidates.
func TestModelCandidates(t *testing.T) {
	ms := []Member{
		{Name: "a", Models: []string{"llama", "llama:lora-sql"}},
		{Name: "b", Models: []string{"llama"}},
		{Name: "c"},
		{Name: "d", Models: []string{"mistral"}},
	}
	for _, policy := range Policies() {
		t.Run(policy, func(t *testing.T) {
			r := mustNew(t, Config{Policy: policy, VirtualNodes: 64, Seed: 3}, ms)
			want := map[string][]string{
				"llama:lora-sql": {"a", "c"},
				"llama":          {"a", "b", "c"},
				"mistral":        {"c", "d"},
				"":               {"a", "b", "c", "d"},
			}
			for model, allowed := range want {
				for _, k := range keys(500) {
					d, err := r.TryPick(Request{Key: k, Model: model})
					if err != nil {
						t.Fatalf("model %q: %v", model, err)
					}
					if !slices.Contains(allowed, d.Backend) {
						t.Fatalf("model %q went to %s, want one of %v", model, d.Backend, allowed)
					}
					d.Done()
				}
			}
			setHealthy(r, "c", false)
			if d, err := r.TryPick(Request{Key: 1, Model: "llama:lora-sql"}); err != nil || d.Backend != "a" {
				t.Fatalf("with c ejected: %v, %v; want a", d.Backend, err)
			}
			setHealthy(r, "a", false)
			if _, err := r.TryPick(Request{Key: 1, Model: "llama:lora-sql"}); err != ErrNoCandidates {
				t.Fatalf("no candidate left: err = %v, want ErrNoCandidates", err)
			}
			if _, err := r.TryPick(Request{Key: 1, Model: "gpt-x"}); err != ErrNoCandidates {
				t.Fatalf("unserved model: err = %v, want ErrNoCandidates", err)
			}
		})
	}
}
