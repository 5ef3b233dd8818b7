package route

import (
	"strings"
	"sync/atomic"
	"testing"
)

// switchable is a Target whose health a test sets, as the backend pool sets
// its backends'.
type switchable struct {
	m    Member
	down atomic.Bool
}

func (s *switchable) ID() string       { return s.m.Name }
func (s *switchable) Models() []string { return s.m.Models }
func (s *switchable) Healthy() bool    { return !s.down.Load() }
func (s *switchable) CacheTokens() int { return s.m.CacheTokens }
func (s *switchable) Threshold() int   { return s.m.Threshold }

// setHealthy sets member name's health as its owner would: the member
// changes, then Refresh. Static members are first replaced by switchable
// ones with the same IDs (their in-flight counts stay).
func setHealthy(r *Router, name string, healthy bool) {
	s := r.snap.Load()
	ts := make([]Target, len(s.members))
	swapped := false
	for i := range s.members {
		ts[i] = s.members[i].t
		if st, ok := ts[i].(*staticMember); ok {
			ts[i], swapped = &switchable{m: st.m}, true
		}
	}
	if swapped {
		if err := r.SetTargets(ts); err != nil {
			panic(err)
		}
	}
	for _, t := range ts {
		if t.ID() == name {
			t.(*switchable).down.Store(!healthy)
		}
	}
	r.Refresh()
}

// TestReconfigureKeepsInFlight: a change of settings, policy included,
// keeps the members' in-flight counts, and the picks made before it are
// released against the same counters.
func TestReconfigureKeepsInFlight(t *testing.T) {
	r := mustNew(t, Config{Policy: "consistent-hash", VirtualNodes: 64}, fleet(3))
	var held []Decision
	for k := range uint64(30) {
		d, err := r.TryPick(Request{Key: k * 0x9e3779b97f4a7c15})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, d)
	}
	before := map[string]int{}
	for _, st := range r.Status() {
		before[st.Name] = st.InFlight
	}
	if err := r.Reconfigure(Config{Policy: "least-outstanding", VirtualNodes: 64, LoadFactor: 2}); err != nil {
		t.Fatal(err)
	}
	if got := r.Config().Policy; got != "least-outstanding" {
		t.Fatalf("policy after Reconfigure %q", got)
	}
	for _, st := range r.Status() {
		if st.InFlight != before[st.Name] {
			t.Errorf("%s: %d in flight after Reconfigure, want %d", st.Name, st.InFlight, before[st.Name])
		}
	}
	if r.InFlight() != len(held) {
		t.Errorf("total %d in flight, want %d", r.InFlight(), len(held))
	}
	for _, d := range held {
		if d.Member == nil || d.Member.ID() != d.Backend {
			t.Fatalf("decision for %s carries member %v", d.Backend, d.Member)
		}
		d.Done()
	}
	for _, st := range r.Status() {
		if st.InFlight != 0 {
			t.Errorf("%s: %d in flight when idle", st.Name, st.InFlight)
		}
	}
	if err := r.Reconfigure(Config{LoadFactor: 0.5}); err == nil || !strings.Contains(err.Error(), "LoadFactor") {
		t.Errorf("invalid LoadFactor: err %v, want one naming LoadFactor", err)
	}
}

// TestDecisionKeepsRemovedMember: a member removed between the pick and the
// forward is still the Decision's member (the caller forwards to it, no
// lookup by name that could miss), and its Done releases the right count.
func TestDecisionKeepsRemovedMember(t *testing.T) {
	r := mustNew(t, Config{VirtualNodes: 64}, fleet(2))
	d, err := r.TryPick(Request{Key: 42})
	if err != nil {
		t.Fatal(err)
	}
	picked := d.Member
	var rest []Member
	for _, st := range r.Status() {
		if st.Name != d.Backend {
			rest = append(rest, Member{Name: st.Name})
		}
	}
	if err := r.SetMembers(rest); err != nil {
		t.Fatal(err)
	}
	if d.Member != picked || d.Member.ID() != d.Backend {
		t.Fatalf("decision's member %v after removal, want %s", d.Member, d.Backend)
	}
	if r.InFlight() != 1 {
		t.Fatalf("total %d in flight, want 1", r.InFlight())
	}
	d.Done()
	if r.InFlight() != 0 {
		t.Fatalf("total %d in flight after Done, want 0", r.InFlight())
	}
}

// observing is a Target that records the outcomes DoneWith hands it.
type observing struct {
	switchable
	got []Outcome
}

func (o *observing) Observe(err error, status int) {
	o.got = append(o.got, Outcome{Err: err, Status: status})
}

// TestDoneWithObservesOnce: the member hears each pick's outcome exactly
// once, after its slot is released; a plain Done hands it nothing.
func TestDoneWithObservesOnce(t *testing.T) {
	m := &observing{switchable: switchable{m: Member{Name: "a"}}}
	r, err := NewTargets(Config{Policy: "least-outstanding"}, []Target{m})
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.TryPick(Request{Key: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d.Member != Target(m) {
		t.Fatalf("picked %v, want the observing member", d.Member)
	}
	d.DoneWith(Outcome{FirstByte: true, Status: 503, PromptTokens: -1, CachedTokens: -1})
	c := d
	c.DoneWith(Outcome{Status: 200})
	d.Done()
	if len(m.got) != 1 || m.got[0].Status != 503 || m.got[0].Err != nil {
		t.Fatalf("observed %+v, want one outcome with status 503", m.got)
	}
	if n := r.Status()[0].InFlight; n != 0 {
		t.Fatalf("in flight %d after DoneWith, want 0", n)
	}

	d, err = r.TryPick(Request{Key: 2})
	if err != nil {
		t.Fatal(err)
	}
	d.Done()
	d.DoneWith(Outcome{Status: 500})
	if len(m.got) != 1 {
		t.Fatalf("observed %+v after Done then DoneWith, want nothing more", m.got)
	}
}
