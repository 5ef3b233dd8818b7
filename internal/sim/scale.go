package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ScaleEvent adds (Delta > 0) or removes (Delta < 0) replicas at a point of
// the run: a fraction of the arrival span (Fraction, with IsFraction) or a
// virtual time (At).
type ScaleEvent struct {
	Delta      int
	At         time.Duration
	Fraction   float64
	IsFraction bool
}

// ParseScale parses "+1@50%", "-1@120" or "-2@90s" (several separated by
// commas).
func ParseScale(s string) ([]ScaleEvent, error) {
	var out []ScaleEvent
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, at, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("scale event %q: want +K@WHEN or -K@WHEN, WHEN a percentage of the run (50%%) or virtual seconds (120, 90s)", part)
		}
		delta, err := strconv.Atoi(d)
		if err != nil || delta == 0 || (d[0] != '+' && d[0] != '-') {
			return nil, fmt.Errorf("scale event %q: %q is not a signed non-zero replica count like +1 or -2", part, d)
		}
		ev := ScaleEvent{Delta: delta}
		switch {
		case strings.HasSuffix(at, "%"):
			p, err := strconv.ParseFloat(strings.TrimSuffix(at, "%"), 64)
			if err != nil || p < 0 || p > 100 {
				return nil, fmt.Errorf("scale event %q: %q is not a percentage within 0..100", part, at)
			}
			ev.Fraction, ev.IsFraction = p/100, true
		default:
			sec, err := strconv.ParseFloat(strings.TrimSuffix(at, "s"), 64)
			if err != nil || sec < 0 {
				return nil, fmt.Errorf("scale event %q: %q is not a non-negative number of virtual seconds", part, at)
			}
			ev.At = time.Duration(sec * float64(time.Second))
		}
		out = append(out, ev)
	}
	return out, nil
}

type scaleAt struct {
	delta int
	at    time.Duration
	label string
}

func resolveScale(evs []ScaleEvent, span time.Duration, replicas int) ([]scaleAt, error) {
	out := make([]scaleAt, 0, len(evs))
	for _, e := range evs {
		at := e.At
		if e.IsFraction {
			at = time.Duration(e.Fraction * float64(span))
		}
		out = append(out, scaleAt{delta: e.Delta, at: at})
	}
	slices.SortStableFunc(out, func(a, b scaleAt) int { return int(a.at - b.at) })
	n := replicas
	for i := range out {
		before := n
		n += out[i].delta
		if n < 1 {
			return nil, fmt.Errorf("sim: scale event %+d at %v leaves no replica", out[i].delta, out[i].at)
		}
		if n > 1024 {
			return nil, fmt.Errorf("sim: scale event %+d at %v exceeds 1024 replicas", out[i].delta, out[i].at)
		}
		out[i].label = fmt.Sprintf("%d→%d", before, n)
	}
	return out, nil
}

// applyScale adds or removes replicas at now. Removed replicas finish what
// they hold; they take nothing new. For policies that place by key it
// measures the share of the workload's distinct keys whose home moved.
func (f *fleet) applyScale(s scaleAt, now time.Time) error {
	rp, ring := f.pickers[0].(*routePicker)
	ring = ring && rp.r.PlacesByKey()
	var before map[uint64]string
	if ring {
		before = map[uint64]string{}
		for _, r := range f.w.Requests {
			if _, ok := before[r.key.Key]; !ok {
				before[r.key.Key] = rp.home(r.key.Key)
			}
		}
	}
	if s.delta > 0 {
		for range s.delta {
			if err := f.addReplica(); err != nil {
				return err
			}
		}
	} else {
		for range -s.delta {
			last := f.active[len(f.active)-1]
			f.reps[last].active = false
			f.active = f.active[:len(f.active)-1]
		}
	}
	for _, p := range f.pickers {
		if err := p.setMembers(f.active); err != nil {
			return err
		}
	}
	if ring {
		moved := 0
		for k, h := range before {
			if rp.home(k) != h {
				moved++
			}
		}
		frac := float64(moved) / float64(len(before))
		if f.keysMoved == nil || frac > *f.keysMoved {
			f.keysMoved = &frac
		}
	}
	for r := range f.queues {
		f.drain(r, now)
	}
	return nil
}
