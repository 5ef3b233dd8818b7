package flowcontrol

import (
	"testing"
	"time"
)

func TestHoldQueuesSheddable(t *testing.T) {
	q := NewQueue(testPolicy(t, Config{}))
	batch := item("batch", -1, 10)
	if got := shedReason(q.Push(batch, t0)); got != ReasonSheddable {
		t.Fatalf("Push of a sheddable item: reason %q, want %q", got, ReasonSheddable)
	}
	if err := q.Hold(batch, t0); err != nil {
		t.Fatalf("Hold: %v", err)
	}
	if err := q.Hold(batch, t0); err == nil {
		t.Error("Hold of a queued item succeeded")
	}
	if err := q.Push(batch, t0); err == nil || shedReason(err) != "" {
		t.Errorf("Push of a held item: %v, want the already-queued error", err)
	}
	std := item("std", 0, 10)
	mustPush(t, q, std, t0.Add(time.Millisecond))
	if got := q.Pop(); got != std {
		t.Errorf("first pop %+v, want the standard item before the held batch item", got.Flow)
	}
	if got := q.Pop(); got != batch {
		t.Errorf("second pop %v, want the held item", got)
	}
	// A held item expires with its band's TTL.
	late := item("batch", -1, 10)
	if err := q.Hold(late, t0); err != nil {
		t.Fatal(err)
	}
	if n := q.Expire(t0.Add(DefaultTTL), nil); n != 1 {
		t.Errorf("expired %d held items at the TTL, want 1", n)
	}
}
