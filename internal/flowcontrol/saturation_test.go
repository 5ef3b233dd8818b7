package flowcontrol

import (
	"strings"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	th := DefaultThresholds()
	fresh := Engine{Known: true, Age: time.Second}
	for _, tc := range []struct {
		m    Member
		want Verdict
	}{
		{Member{InFlight: 3, Limit: 4}, Free},
		{Member{InFlight: 4, Limit: 4}, FullInFlight},
		{Member{InFlight: 100}, Free},
		{Member{QueuedTokens: 5000, TokenLimit: 5000}, FullWork},
		{Member{Engine: Engine{Known: true, Age: th.MaxSignalAge + 1}}, FullStale},
		{Member{Engine: Engine{Known: false, Age: time.Hour, Waiting: 100}}, Free},
		{Member{Engine: withWaiting(fresh, DefaultMaxWaiting)}, Free},
		{Member{Engine: withWaiting(fresh, DefaultMaxWaiting+1)}, FullWaiting},
		{Member{Engine: Engine{Known: true, KVUtil: 0.95}}, FullKV},
		{Member{Engine: Engine{Known: true, KVUtil: 0.5}}, Free},
	} {
		if got := Judge(tc.m, th); got != tc.want {
			t.Errorf("Judge(%+v) = %v; want %v", tc.m, got, tc.want)
		}
	}
	if got := Judge(Member{Engine: Engine{Known: true, Waiting: 1000}}, Thresholds{MaxWaiting: -1, MaxKVUtil: 2, MaxSignalAge: time.Second}); got != Free {
		t.Errorf("ignored waiting: %v", got)
	}
}

func withWaiting(e Engine, w int) Engine { e.Waiting = w; return e }

func TestSaturated(t *testing.T) {
	th := DefaultThresholds()
	full := Member{InFlight: 2, Limit: 2}
	if !Saturated(nil, th) || !Saturated([]Member{full, full}, th) {
		t.Error("all full must be saturated")
	}
	if Saturated([]Member{full, {InFlight: 1, Limit: 2}}, th) {
		t.Error("one free member is not saturated")
	}
}

func TestThresholdErrors(t *testing.T) {
	for _, tc := range []struct {
		th   Thresholds
		want string
	}{
		{Thresholds{MaxWaiting: -2}, "max_waiting"},
		{Thresholds{MaxKVUtil: -0.1}, "max_kv_utilization"},
		{Thresholds{MaxSignalAge: -1}, "max_signal_age"},
	} {
		if _, err := tc.th.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v", tc.th, err)
		}
	}
	if v := Verdict(9).String(); v != "verdict(9)" || FullKV.String() != "kv_cache" {
		t.Error(v)
	}
}

func TestHeadroom(t *testing.T) {
	h, err := NewHeadroom(HeadroomConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !h.Admits(0, 7, 8, t0) {
		t.Fatal("nothing reserved before a higher band asks")
	}
	h.Saw(10, t0)
	h.Saw(0, t0)
	if h.Admits(0, 7, 8, t0.Add(time.Second)) || !h.Admits(0, 6, 8, t0.Add(time.Second)) {
		t.Error("one slot of 8 kept for the active higher band")
	}
	if !h.Admits(10, 7, 8, t0) {
		t.Error("the higher band may take the reserved slot")
	}
	if got := h.Reserved(0, 256, t0); got != 32 {
		t.Errorf("Reserved(0, 256) = %d; want 32", got)
	}
	h.Saw(5, t0)
	if got := h.Reserved(0, 8, t0); got != 2 {
		t.Errorf("two active higher bands: %d", got)
	}
	if got := h.Reserved(-1, 2, t0); got != 1 {
		t.Errorf("reservation at most limit-1: %d", got)
	}
	if !h.Admits(0, 7, 8, t0.Add(DefaultHeadroomWindow+1)) {
		t.Error("reservation outlived the window")
	}
	off, _ := NewHeadroom(HeadroomConfig{Fraction: -1})
	off.Saw(10, t0)
	if off.Reserved(0, 8, t0) != 0 {
		t.Error("negative fraction disables headroom")
	}
	for p := range MaxBands + 5 {
		h.Saw(p, t0.Add(time.Duration(p)))
	}
	if len(h.seen) > MaxBands {
		t.Errorf("%d bands remembered", len(h.seen))
	}
	if _, err := NewHeadroom(HeadroomConfig{Fraction: 2}); err == nil {
		t.Error("fraction 2 accepted")
	}
}
