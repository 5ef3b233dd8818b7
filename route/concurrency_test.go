package route

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBoundUnderConcurrency hammers a small fleet with hot keys from many
// goroutines (run it with -race). For every pick it checks, from the
// Decision and independently from the test's own counters, that no backend
// ever held more than its threshold or its bounded-load limit, and that the
// counters return to zero.
func TestBoundUnderConcurrency(t *testing.T) {
	const (
		goroutines = 64
		picks      = 2000
		backends   = 8
		threshold  = 6
		c          = 1.25
	)
	for _, policy := range Policies() {
		t.Run(policy, func(t *testing.T) {
			r := mustNew(t, Config{Policy: policy, DefaultThreshold: threshold, VirtualNodes: 128, QueueDepth: goroutines, QueueWait: time.Minute, Seed: 9}, fleet(backends))
			// Total in flight never exceeds the number of goroutines, so
			// no bound can exceed ceil(c·goroutines/n).
			maxBound := int(math.Ceil(c * goroutines / backends))
			var held [backends]atomic.Int64 // test-side: charged after Pick, released before Done
			var maxHeld [backends]atomic.Int64
			var maxLoad atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					for i := range picks {
						// Three hot keys and a tail, with spill keys.
						k := uint64(i % 3)
						if i%4 == 3 {
							k = splitmix(uint64(g*picks + i))
						}
						d, err := r.Pick(context.Background(), Request{Key: k, SpillKeys: []uint64{k + 100, k + 200}})
						if err != nil {
							errs <- err
							return
						}
						var b int
						fmt.Sscanf(d.Backend, "vllm-%d", &b)
						h := held[b].Add(1)
						for {
							m := maxHeld[b].Load()
							if h <= m || maxHeld[b].CompareAndSwap(m, h) {
								break
							}
						}
						for {
							m := maxLoad.Load()
							if int64(d.Load) <= m || maxLoad.CompareAndSwap(m, int64(d.Load)) {
								break
							}
						}
						if policy != "consistent-hash" {
							if d.Load > threshold || (d.Bound > 0 && d.Load > d.Bound) {
								errs <- fmt.Errorf("%s at load %d, bound %d, threshold %d", d.Backend, d.Load, d.Bound, threshold)
							}
							if policy == "prefix-aware" && d.Bound > maxBound {
								errs <- fmt.Errorf("bound %d above ceil(c·goroutines/n) = %d", d.Bound, maxBound)
							}
						}
						held[b].Add(-1)
						d.Done()
						d.Done()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for b := range held {
				if policy != "consistent-hash" && maxHeld[b].Load() > threshold {
					t.Errorf("vllm-%d held %d at once, threshold %d", b, maxHeld[b].Load(), threshold)
				}
			}
			t.Logf("max load at acquire %d (threshold %d, bound cap %d)", maxLoad.Load(), threshold, maxBound)
			if r.InFlight() != 0 {
				t.Errorf("InFlight = %d after all Done, want 0", r.InFlight())
			}
			for _, st := range r.Status() {
				if st.InFlight != 0 {
					t.Errorf("%s InFlight = %d after all Done", st.Name, st.InFlight)
				}
			}
		})
	}
}

// TestBoundExactSerial: with nothing else in flight, prefix-aware puts
// exactly ceil(c·(total+1)/n) on a hot key's home before spilling (without
// slack; TestSlack covers it).
func TestBoundExactSerial(t *testing.T) {
	r := mustNew(t, Config{VirtualNodes: 64, LoadFactor: 2, Slack: -1}, fleet(4))
	var ds []Decision
	defer func() {
		for i := range ds {
			ds[i].Done()
		}
	}()
	home := r.Home(42)
	onHome := 0
	for total := int64(1); total <= 40; total++ {
		d, err := r.TryPick(Request{Key: 42})
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		bound := int(math.Ceil(2 * float64(total) / 4))
		if d.Backend == home {
			onHome++
			if d.Reason != ReasonAffinity {
				t.Fatalf("pick %d on home with reason %v", total, d.Reason)
			}
		} else if onHome != bound {
			t.Fatalf("pick %d spilled with %d on home, bound %d", total, onHome, bound)
		}
		if d.Bound != min(bound, 64) {
			t.Fatalf("pick %d: Bound = %d, want %d", total, d.Bound, bound)
		}
	}
}

// TestSpillChain: when the key's home is full, prefix-aware tries the homes
// of the spill keys in order before walking clockwise; the switch turns the
// chain off.
func TestSpillChain(t *testing.T) {
	ms := fleet(6)
	cfg := Config{VirtualNodes: 64, DefaultThreshold: 1, LoadFactor: 100}
	r := mustNew(t, cfg, ms)
	key := uint64(0xabcdef)
	home := r.Home(key)
	// Spill keys: one landing on home (skipped), then two on distinct others.
	var spill []uint64
	var want []string
	for k := uint64(1); len(want) < 2; k++ {
		h := r.Home(k * 0x9e3779b97f4a7c15)
		if len(spill) == 0 && h == home {
			spill = append(spill, k*0x9e3779b97f4a7c15)
			continue
		}
		if len(spill) > 0 && h != home && (len(want) == 0 || h != want[0]) {
			spill = append(spill, k*0x9e3779b97f4a7c15)
			want = append(want, h)
		}
	}
	req := Request{Key: key, SpillKeys: spill}
	d0, _ := r.TryPick(req)
	d1, _ := r.TryPick(req)
	d2, _ := r.TryPick(req)
	d3, _ := r.TryPick(req)
	got := []string{d0.Backend + "/" + d0.Reason.String(), fmt.Sprintf("%s/%v/%d", d1.Backend, d1.Reason, d1.Distance), fmt.Sprintf("%s/%v/%d", d2.Backend, d2.Reason, d2.Distance), d3.Reason.String()}
	exp := []string{home + "/affinity", want[0] + "/spill-chain/2", want[1] + "/spill-chain/3", "spill"}
	for i := range got {
		if got[i] != exp[i] {
			t.Fatalf("decisions %v, want %v", got, exp)
		}
	}
	for _, d := range []Decision{d0, d1, d2, d3} {
		if d.Home != home {
			t.Errorf("Home = %s, want %s", d.Home, home)
		}
		d.Done()
	}

	cfg.DisableSpillChain = true
	r = mustNew(t, cfg, ms)
	d0, _ = r.TryPick(req)
	d1, _ = r.TryPick(req)
	if d1.Reason != ReasonSpill || d1.Distance != 1 {
		t.Fatalf("chain disabled: %v/%d, want spill/1", d1.Reason, d1.Distance)
	}
	x := r.Explain(req)
	if x.Backend == "" || x.Reason != ReasonSpill || x.Distance != 2 || len(x.Skipped) < 2 || x.Skipped[0].Backend != home {
		t.Fatalf("Explain = %+v", x)
	}
	d0.Done()
	d1.Done()
}

func TestSaturation(t *testing.T) {
	ctx := context.Background()
	t.Run("wait expires", func(t *testing.T) {
		r := mustNew(t, Config{VirtualNodes: 8, DefaultThreshold: 1, QueueWait: 20 * time.Millisecond}, fleet(1))
		d, _ := r.Pick(ctx, Request{Key: 1})
		defer d.Done()
		_, err := r.Pick(ctx, Request{Key: 1})
		var se *SaturatedError
		if !errors.Is(err, ErrSaturated) || !errors.As(err, &se) || se.RetryAfter <= 0 || se.QueueFull || se.Waited < 20*time.Millisecond {
			t.Fatalf("err = %#v, want a SaturatedError after waiting", err)
		}
		if x := r.Explain(Request{Key: 1}); x.Err != ErrSaturated {
			t.Fatalf("Explain.Err = %v", x.Err)
		}
		if _, err := r.TryPick(Request{Key: 1}); !errors.Is(err, ErrSaturated) {
			t.Fatalf("TryPick err = %v", err)
		}
	})
	t.Run("woken by Done, queue full, ctx", func(t *testing.T) {
		r := mustNew(t, Config{VirtualNodes: 8, DefaultThreshold: 1, QueueDepth: 1, QueueWait: time.Hour}, fleet(1))
		d, _ := r.Pick(ctx, Request{Key: 1})
		got := make(chan Decision)
		go func() {
			d, err := r.Pick(ctx, Request{Key: 1})
			if err != nil {
				t.Error(err)
			}
			got <- d
		}()
		for r.waiters.Load() != 1 {
			time.Sleep(time.Millisecond)
		}
		_, err := r.Pick(ctx, Request{Key: 1})
		var se *SaturatedError
		if !errors.As(err, &se) || !se.QueueFull {
			t.Fatalf("queue full: err = %v", err)
		}
		d.Done()
		d2 := <-got
		if d2.Queued <= 0 || d2.Backend != "vllm-0" {
			t.Fatalf("queued decision %+v", d2)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := r.Pick(cctx, Request{Key: 1}); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: err = %v", err)
		}
		d2.Done()
		if r.InFlight() != 0 || r.waiters.Load() != 0 {
			t.Fatalf("InFlight %d waiters %d", r.InFlight(), r.waiters.Load())
		}
	})
	t.Run("no candidates", func(t *testing.T) {
		r := mustNew(t, Config{VirtualNodes: 8, QueueWait: time.Hour}, fleet(1))
		setHealthy(r, "vllm-0", false)
		if _, err := r.Pick(ctx, Request{Key: 1}); err != ErrNoCandidates {
			t.Fatalf("err = %v, want ErrNoCandidates", err)
		}
	})
	t.Run("no queue", func(t *testing.T) {
		r := mustNew(t, Config{VirtualNodes: 8, DefaultThreshold: 1, QueueDepth: -1}, fleet(1))
		d, _ := r.Pick(ctx, Request{Key: 1})
		defer d.Done()
		if _, err := r.Pick(ctx, Request{Key: 1}); !errors.Is(err, ErrSaturated) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestMembersKeepCounters: members that stay keep their in-flight count; a
// removed member's requests are still released.
func TestMembersKeepCounters(t *testing.T) {
	r := mustNew(t, Config{VirtualNodes: 32, Policy: "least-outstanding", Seed: 1}, fleet(2))
	a, _ := r.TryPick(Request{})
	b, _ := r.TryPick(Request{})
	if a.Backend == b.Backend {
		t.Fatalf("least-outstanding put both on %s", a.Backend)
	}
	if err := r.SetMembers([]Member{{Name: a.Backend}, {Name: "vllm-9"}}); err != nil {
		t.Fatal(err)
	}
	st := r.Status()
	if st[0].Name != a.Backend || st[0].InFlight != 1 || st[1].InFlight != 0 {
		t.Fatalf("Status after SetMembers: %+v", st)
	}
	b.Done() // b's member was removed
	a.Done()
	if r.InFlight() != 0 {
		t.Fatalf("InFlight = %d", r.InFlight())
	}
	if err := r.SetMembers(fleet(2)); err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Status() {
		if s.InFlight != 0 {
			t.Fatalf("%s InFlight %d", s.Name, s.InFlight)
		}
	}
}

// TestSlack: with Slack the home of a hot key takes
// max(ceil(c·total/n), ceil(total/n)+Slack) before spilling.
func TestSlack(t *testing.T) {
	for _, slack := range []int{0, 1, 3, 6} {
		r := mustNew(t, Config{Policy: "prefix-aware", VirtualNodes: 64, Slack: slack}, fleet(4))
		s := slack
		if s == 0 {
			s = DefaultSlack
		}
		home := r.Home(42)
		onHome := 0
		var ds []Decision
		for total := 1; total <= 80; total++ {
			d, err := r.TryPick(Request{Key: 42})
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
			bound := max(int(math.Ceil(1.25*float64(total)/4)), (total+3)/4+s)
			if d.Bound != bound {
				t.Fatalf("slack %d, pick %d: Bound = %d, want %d", slack, total, d.Bound, bound)
			}
			if d.Backend == home {
				onHome++
			} else if onHome != bound {
				t.Fatalf("slack %d, pick %d: spilled with %d on home, bound %d", slack, total, onHome, bound)
			}
			if d.Load > d.Bound {
				t.Fatalf("slack %d, pick %d: load %d over bound %d", slack, total, d.Load, d.Bound)
			}
		}
		for i := range ds {
			ds[i].Done()
		}
	}
}
