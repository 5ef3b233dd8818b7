package flowcontrol

import (
	"testing"
	"time"
)

func TestCapacityLearning(t *testing.T) {
	var c capacity
	at := time.Unix(100, 0)
	c.learn(Scrape{Known: true, At: at, Running: 5, Waiting: 1}, 2)
	if c.slots != 0 {
		t.Fatal("a short queue taught a capacity")
	}
	c.learn(Scrape{Known: true, At: at.Add(time.Second), Running: 8, Waiting: 10}, 2)
	c.learn(Scrape{Known: true, At: at.Add(time.Second), Running: 3, Waiting: 10}, 2)
	if c.slots != 8 {
		t.Fatalf("slots %d; want 8 (the same scrape is read once)", c.slots)
	}
	c.learn(Scrape{Known: true, At: at.Add(2 * time.Second), Running: 8}, 2)
	if c.slots != 9 {
		t.Fatalf("slots %d; want 9 after a full scrape with nothing waiting", c.slots)
	}
	c.learn(Scrape{Known: true, At: at.Add(3 * time.Second), Running: 8, Waiting: 1}, 2)
	if c.slots != 8 {
		t.Fatalf("slots %d; want 8 back when the ninth waited", c.slots)
	}
	c.learn(Scrape{Known: true, At: at.Add(4 * time.Second), Running: 5, Waiting: 1}, 2)
	if c.slots != 8 {
		t.Fatalf("slots %d; a request not yet scheduled, with room to run, taught a capacity", c.slots)
	}
}

func newRoom(t *testing.T, cfg RoomConfig) *Room[string] {
	t.Helper()
	r, err := NewRoom[string](cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRoomFit: headroom for an active higher band (in requests and in
// queued prefill) paces a member; its in-flight bound, learned capacity,
// token limit or engine signals make it full.
func TestRoomFit(t *testing.T) {
	r := newRoom(t, RoomConfig{})
	free := Scrape{}
	if f, _ := r.Fit("a", Load{InFlight: 7, Limit: 8}, free, 0, t0); f != Fits {
		t.Fatalf("no higher band active: %v, want fits", f)
	}
	r.Saw(10, 0, t0)
	for _, tc := range []struct {
		name string
		l    Load
		s    Scrape
		prio int
		want Fit
	}{
		{"the last slot, kept for the higher band", Load{InFlight: 7, Limit: 8}, free, 0, Paced},
		{"the higher band itself", Load{InFlight: 7, Limit: 8}, free, 10, Fits},
		{"prefill headroom reached", Load{InFlight: 1, Limit: 8, QueuedTokens: DefaultPrefillHeadroom}, free, 0, Paced},
		{"prefill below the headroom", Load{InFlight: 1, Limit: 8, QueuedTokens: DefaultPrefillHeadroom - 1}, free, 0, Fits},
		{"the higher band beside queued prefill", Load{InFlight: 1, Limit: 8, QueuedTokens: 1 << 20}, free, 10, Fits},
		{"in-flight bound", Load{InFlight: 8, Limit: 8}, free, 10, Full},
		{"engine queueing", Load{InFlight: 1, Limit: 8}, Scrape{Known: true, At: t0, Waiting: 3}, 10, Full},
		{"stale signals", Load{InFlight: 1, Limit: 8}, Scrape{Known: true, At: t0.Add(-time.Hour)}, 10, Full},
	} {
		if f, _ := r.Fit("m-"+tc.name, tc.l, tc.s, tc.prio, t0); f != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, f, tc.want)
		}
	}
	tl := newRoom(t, RoomConfig{TokenLimit: 100})
	if f, _ := tl.Fit("a", Load{QueuedTokens: 100}, free, 0, t0); f != Full {
		t.Errorf("at the token limit: %v, want full", f)
	}
	// A capacity learned from a scrape bounds the member; an engine sent
	// priorities takes the highest active band past it.
	for _, send := range []bool{false, true} {
		r := newRoom(t, RoomConfig{EnginePriority: send})
		r.Saw(10, 0, t0)
		s := Scrape{Known: true, At: t0, Running: 2, Waiting: 5, TakesPriority: true}
		if f, _ := r.Fit("a", Load{InFlight: 2, Limit: 100}, s, 0, t0); f != Full {
			t.Errorf("engine priority %v: the lower band at the learned capacity: %v, want full", send, f)
		}
		want := Full
		if send {
			want = Fits
		}
		if f, _ := r.Fit("a", Load{InFlight: 2, Limit: 100}, s, 10, t0); f != want {
			t.Errorf("engine priority %v: the top band at the learned capacity: %v, want %v", send, f, want)
		}
	}
}

// TestRoomSlowStart: a member with signals whose capacity is not known
// takes MinProbeStep requests, then is paced and due a fresh scrape, at
// most once per Rescrape; a scrape that shows them all running raises the
// bound by half of what ran. Without Rescrape there is no slow start.
func TestRoomSlowStart(t *testing.T) {
	r := newRoom(t, RoomConfig{Rescrape: 50 * time.Millisecond})
	s := Scrape{Known: true, At: t0}
	for n := range MinProbeStep {
		if f, due := r.Fit("a", Load{InFlight: n, Limit: 256}, s, 0, t0); f != Fits || due {
			t.Fatalf("request %d of the first step: %v, rescrape %v", n, f, due)
		}
	}
	f, due := r.Fit("a", Load{InFlight: MinProbeStep, Limit: 256}, s, 0, t0)
	if f != Paced || !due {
		t.Fatalf("at the probe bound: %v, rescrape %v; want paced and a rescrape", f, due)
	}
	if _, due := r.Fit("a", Load{InFlight: MinProbeStep, Limit: 256}, s, 0, t0.Add(49*time.Millisecond)); due {
		t.Error("a second rescrape within the interval")
	}
	s = Scrape{Known: true, At: t0.Add(10 * time.Millisecond), Running: 12}
	if f, _ := r.Fit("a", Load{InFlight: 12 + 5, Limit: 256}, s, 0, t0.Add(20*time.Millisecond)); f != Fits {
		t.Errorf("after a scrape showing 12 running: %v at 17 in flight, want fits (bound 18)", f)
	}
	if f, _ := r.Fit("a", Load{InFlight: 12 + 6, Limit: 256}, s, 0, t0.Add(20*time.Millisecond)); f != Paced {
		t.Errorf("after a scrape showing 12 running: %v at 18 in flight, want paced", f)
	}
	off := newRoom(t, RoomConfig{})
	if f, due := off.Fit("a", Load{InFlight: 100, Limit: 256}, Scrape{Known: true, At: t0}, 0, t0); f != Fits || due {
		t.Errorf("without rescrapes: %v, rescrape %v", f, due)
	}
}

func TestRoomConfigErrors(t *testing.T) {
	for _, cfg := range []RoomConfig{{TokenLimit: -1}, {Rescrape: -1}, {Thresholds: Thresholds{MaxWaiting: -2}}, {Headroom: HeadroomConfig{Fraction: 2}}} {
		if _, err := NewRoom[string](cfg); err == nil {
			t.Errorf("NewRoom(%+v) accepted", cfg)
		}
	}
}

// TestShortPromptLane: while short prompts are active, a long prompt is
// held when all but ShortShare of the members (rounded down) are busy with
// one; not when no short prompt was seen within the headroom window, not
// on a fleet too small to keep one free, not when it is turned off.
func TestShortPromptLane(t *testing.T) {
	r := newRoom(t, RoomConfig{})
	long, short := DefaultPrefillHeadroom, DefaultPrefillHeadroom-1
	if !r.Long(long) || r.Long(short) || !r.Busy(long) || r.Busy(short) {
		t.Fatalf("Long/Busy at %d and %d tokens", long, short)
	}
	if r.LaneFull(7, 8, t0) {
		t.Error("held with no short prompt seen")
	}
	r.Saw(0, long, t0)
	if r.LaneFull(7, 8, t0) {
		t.Error("a long prompt made short prompts active")
	}
	r.Saw(0, short, t0)
	for _, tc := range []struct {
		busy, n int
		want    bool
	}{{6, 8, false}, {7, 8, true}, {8, 8, true}, {13, 16, false}, {14, 16, true}, {6, 7, false}, {1, 2, false}} {
		if got := r.LaneFull(tc.busy, tc.n, t0); got != tc.want {
			t.Errorf("%d of %d busy: held %v, want %v", tc.busy, tc.n, got, tc.want)
		}
	}
	if r.LaneFull(7, 8, t0.Add(DefaultHeadroomWindow+time.Millisecond)) {
		t.Error("held after the window with no short prompt since")
	}
	off := newRoom(t, RoomConfig{ShortShare: -1})
	off.Saw(0, short, t0)
	if off.Long(long) {
		t.Error("a long prompt with the lane off")
	}
	if _, err := NewRoom[string](RoomConfig{ShortShare: 1}); err == nil {
		t.Error("a share of 1 was accepted")
	}
}
