package route

import (
	"errors"
	"testing"
)

func TestPickMemberChargesTheNamedMember(t *testing.T) {
	r, err := New(Config{DefaultThreshold: 2, LoadFactor: 10}, []Member{{Name: "a"}, {Name: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	d1, err := r.PickMember("b", Request{Key: 1}, true)
	if err != nil || d1.Backend != "b" || d1.Load != 1 {
		t.Fatalf("first pick on b = %+v, %v; want b with load 1", d1, err)
	}
	d2, err := r.PickMember("b", Request{Key: 1}, true)
	if err != nil || d2.Load != 2 {
		t.Fatalf("second pick on b = %+v, %v; want load 2", d2, err)
	}
	// b is at its threshold of 2: bounded fails, unbounded still charges.
	if _, err := r.PickMember("b", Request{Key: 1}, true); !errors.Is(err, ErrSaturated) {
		t.Fatalf("third bounded pick on b: err = %v, want saturated", err)
	}
	d3, err := r.PickMember("b", Request{Key: 1}, false)
	if err != nil || d3.Load != 3 {
		t.Fatalf("unbounded pick on b = %+v, %v; want load 3", d3, err)
	}
	if got := r.InFlight(); got != 3 {
		t.Fatalf("in flight = %d, want 3", got)
	}
	for _, d := range []Decision{d1, d2, d3} {
		d.Done()
	}
	if got := r.InFlight(); got != 0 {
		t.Fatalf("in flight after Done = %d, want 0", got)
	}
	if _, err := r.PickMember("zzz", Request{}, false); !errors.Is(err, ErrNoCandidates) {
		t.Fatalf("unknown member: err = %v, want ErrNoCandidates", err)
	}
	setHealthy(r, "a", false)
	if _, err := r.PickMember("a", Request{}, false); !errors.Is(err, ErrNoCandidates) {
		t.Fatalf("ejected member: err = %v, want ErrNoCandidates", err)
	}
}

func TestPickMemberReasonFollowsTheHome(t *testing.T) {
	r, err := New(Config{}, []Member{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	home := r.Home(42)
	other := "a"
	if home == "a" {
		other = "b"
	}
	d, err := r.PickMember(home, Request{Key: 42}, true)
	if err != nil || d.Reason != ReasonAffinity || d.Home != home {
		t.Fatalf("pick on home %s = %+v, %v; want affinity", home, d, err)
	}
	d.Done()
	d, err = r.PickMember(other, Request{Key: 42}, true)
	if err != nil || d.Reason != ReasonSpill || d.Home != home {
		t.Fatalf("pick on %s = %+v, %v; want spill from %s", other, d, err, home)
	}
	d.Done()
}
