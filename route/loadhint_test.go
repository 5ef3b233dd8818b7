package route

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// TestLoadHint: a hint adds the other routers' requests to a member's load
// and to the bound's total; this router's own picks after the hint are still
// counted; a negative load clears it; unknown and removed members drop it.
func TestLoadHint(t *testing.T) {
	r := mustNew(t, Config{VirtualNodes: 64, LoadFactor: 1.25, Slack: -1}, fleet(4))
	key := uint64(42)
	home := r.Home(key)
	d0, _ := r.TryPick(Request{Key: key}) // one of our own on home
	defer d0.Done()

	// The backend reports 7 (ours plus 6 from other routers); the others
	// report 2 each. Fleet total: 7 + 3·2 = 13.
	for _, st := range r.Status() {
		load := 2
		if st.Name == home {
			load = 7
		}
		r.SetLoadHint(st.Name, load)
	}
	r.SetLoadHint("nobody", 99) // ignored
	x := r.Explain(Request{Key: key})
	if x.TotalInFlight != 13 {
		t.Fatalf("TotalInFlight = %d, want 13", x.TotalInFlight)
	}
	wantBound := int(math.Ceil(1.25 * 14 / 4)) // 5: home at 7 is over it
	if x.Bound != wantBound || x.Backend == home || len(x.Skipped) == 0 || x.Skipped[0].Why != "at bound 7/5" {
		t.Fatalf("Explain = %+v, want a spill past home at bound 7/%d", x, wantBound)
	}
	for _, st := range r.Status() {
		want := 2
		if st.Name == home {
			want = 7
		}
		if st.Load != want {
			t.Fatalf("%s: Status Load = %d, want %d (InFlight %d)", st.Name, st.Load, want, st.InFlight)
		}
	}
	d1, err := r.TryPick(Request{Key: key})
	if err != nil || d1.Backend == home || d1.Load != 3 {
		t.Fatalf("pick with hints: %+v %v, want a spill with load 3", d1, err)
	}
	// Our own pick is counted on top of the hint until the next one.
	for _, st := range r.Status() {
		if st.Name == d1.Backend && st.Load != 3 {
			t.Fatalf("own pick after hint: Load %d, want 3", st.Load)
		}
	}
	d1.Done()

	// Clearing the hints restores the router's own view.
	for _, st := range r.Status() {
		r.SetLoadHint(st.Name, -1)
	}
	d2, err := r.TryPick(Request{Key: key}) // bound ceil(1.25·2/4) = 1: home (1) is full
	if err != nil || d2.Backend == home || d2.Load != 1 || d2.Bound != 1 {
		t.Fatalf("hints cleared: %+v %v, want a spill with load 1 of bound 1", d2, err)
	}
	d2.Done()
	if x := r.Explain(Request{Key: key}); x.TotalInFlight != 1 {
		t.Fatalf("TotalInFlight after clearing = %d, want 1", x.TotalInFlight)
	}

	// A hint below our own count adds nothing.
	r.SetLoadHint(home, 0)
	if x := r.Explain(Request{Key: key}); x.TotalInFlight != 1 {
		t.Fatalf("hint below own count: TotalInFlight = %d, want 1", x.TotalInFlight)
	}

	// A removed member's hint stops counting.
	ms := fleet(4)
	other := ms[0].Name
	if other == home {
		other = ms[1].Name
	}
	r.SetLoadHint(other, 50)
	var keep []Member
	for _, m := range ms {
		if m.Name != other {
			keep = append(keep, m)
		}
	}
	if err := r.SetMembers(keep); err != nil {
		t.Fatal(err)
	}
	if x := r.Explain(Request{Key: key}); x.TotalInFlight != 1 {
		t.Fatalf("removed member's hint still counted: TotalInFlight = %d", x.TotalInFlight)
	}
}

// TestLoadHintWakesWaiters: a lower hint frees capacity, so a queued Pick
// retries at once instead of waiting for a Done.
func TestLoadHintWakesWaiters(t *testing.T) {
	r := mustNew(t, Config{VirtualNodes: 8, DefaultThreshold: 2, QueueWait: 5 * time.Second}, fleet(1))
	name := fleet(1)[0].Name
	r.SetLoadHint(name, 2) // full by other routers' requests
	got := make(chan error, 1)
	go func() {
		d, err := r.Pick(context.Background(), Request{Key: 1})
		if err == nil {
			d.Done()
		}
		got <- err
	}()
	for r.waiters.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	r.SetLoadHint(name, 1)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a lower hint did not wake the queued pick")
	}
}

// TestLoadHintConcurrent: hints set while picks run (under -race) leave
// counters consistent: after all Done calls and clearing the hints, nothing
// is in flight and the bound's total is zero.
func TestLoadHintConcurrent(t *testing.T) {
	r := mustNew(t, Config{VirtualNodes: 64, DefaultThreshold: 8, QueueWait: time.Second}, fleet(4))
	stop := make(chan struct{})
	hinted := make(chan struct{})
	go func() {
		defer close(hinted)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			for _, st := range r.Status() {
				r.SetLoadHint(st.Name, (i+st.InFlight)%5)
			}
		}
	}()
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 500 {
				d, err := r.Pick(context.Background(), Request{Key: uint64(g*7 + i%3)})
				if err != nil {
					continue
				}
				if d.Load > d.Bound {
					t.Errorf("load %d over bound %d", d.Load, d.Bound)
				}
				d.Done()
			}
		}()
	}
	for range 8 {
		<-done
	}
	close(stop)
	<-hinted
	for _, st := range r.Status() {
		r.SetLoadHint(st.Name, -1)
	}
	if x := r.Explain(Request{Key: 1}); x.TotalInFlight != 0 || r.InFlight() != 0 {
		t.Fatalf("after the run: TotalInFlight %d, InFlight %d", x.TotalInFlight, r.InFlight())
	}
}

// TestLoadHintSinceLeavesOutFinished: a load read while this router's
// request ran, set after the request ended, does not count that request as
// another router's: the member takes a new request at threshold 1.
func TestLoadHintSinceLeavesOutFinished(t *testing.T) {
	r := mustNew(t, Config{VirtualNodes: 8, DefaultThreshold: 1}, fleet(1))
	name := fleet(1)[0].Name
	d, err := r.TryPick(Request{Key: 1})
	if err != nil {
		t.Fatal(err)
	}
	mark := r.Completed(name) // the scrape is sent: the engine runs d's request
	d.Done()                  // the request ends before the scrape is applied
	r.SetLoadHintSince(name, 1, mark)
	d, err = r.TryPick(Request{Key: 1})
	if err != nil {
		t.Fatalf("after the hint of a finished request: %v", err)
	}
	d.Done()

	// Without the mark the same hint counts the finished request again.
	mark = r.Completed(name)
	r.SetLoadHint(name, 1)
	if _, err := r.TryPick(Request{Key: 1}); !errors.Is(err, ErrSaturated) {
		t.Fatalf("a hint of 1 with nothing in flight: %v, want saturated", err)
	}
	// Another router's request (no completion here since the mark) still counts.
	r.SetLoadHintSince(name, 1, mark)
	if _, err := r.TryPick(Request{Key: 1}); !errors.Is(err, ErrSaturated) {
		t.Fatalf("another router's request: %v, want saturated", err)
	}
	if got := r.Completed("nobody"); got != -1 {
		t.Fatalf("Completed of an unknown name = %d, want -1", got)
	}
}
