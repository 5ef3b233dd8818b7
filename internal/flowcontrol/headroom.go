package flowcontrol

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Defaults of HeadroomConfig.
const (
	DefaultHeadroomWindow   = 10 * time.Second
	DefaultHeadroomFraction = 0.125
)

// HeadroomConfig says how much of each member is kept for higher bands.
type HeadroomConfig struct {
	// Window: a band that had a request within it is active. 0 means
	// DefaultHeadroomWindow.
	Window time.Duration
	// Fraction of a member's limit kept free for each active band above a
	// request's (at least one slot each). 0 means
	// DefaultHeadroomFraction; negative disables headroom.
	Fraction float64
}

// Validate returns c with defaults filled, or an error naming the field.
func (c HeadroomConfig) Validate() (HeadroomConfig, error) {
	if c.Window < 0 {
		return c, fmt.Errorf("flow_control.headroom_window: %v is negative", c.Window)
	}
	if math.IsNaN(c.Fraction) || c.Fraction > 1 {
		return c, fmt.Errorf("flow_control.headroom_fraction: %v is above 1", c.Fraction)
	}
	c.Window = cmp.Or(c.Window, DefaultHeadroomWindow)
	c.Fraction = cmp.Or(c.Fraction, DefaultHeadroomFraction)
	return c, nil
}

// Headroom remembers which bands asked recently and keeps slots on each
// member for them, so a lower band cannot fill a member's last slots while
// a higher one is active. Not safe for concurrent use; time is passed in.
type Headroom struct {
	cfg  HeadroomConfig
	seen []seenBand // highest priority first, at most MaxBands
}

type seenBand struct {
	prio int
	last time.Time
}

// NewHeadroom returns a Headroom under cfg, validated.
func NewHeadroom(cfg HeadroomConfig) (*Headroom, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	return &Headroom{cfg: cfg, seen: make([]seenBand, 0, 8)}, nil
}

// Saw records a request of band priority at now.
func (h *Headroom) Saw(priority int, now time.Time) {
	for i := range h.seen {
		if h.seen[i].prio == priority {
			if now.After(h.seen[i].last) {
				h.seen[i].last = now
			}
			return
		}
	}
	if len(h.seen) >= MaxBands {
		h.dropOldest()
	}
	i, _ := slices.BinarySearchFunc(h.seen, priority, func(s seenBand, p int) int { return p - s.prio })
	h.seen = slices.Insert(h.seen, i, seenBand{prio: priority, last: now})
}

func (h *Headroom) dropOldest() {
	o := 0
	for i := range h.seen {
		if h.seen[i].last.Before(h.seen[o].last) {
			o = i
		}
	}
	h.seen = slices.Delete(h.seen, o, o+1)
}

// Reserved is how many of a member's limit slots a request of band
// priority must leave free at now: for each band above it active within
// the window, Fraction of limit rounded up, together at most limit-1.
func (h *Headroom) Reserved(priority, limit int, now time.Time) int {
	if h == nil || h.cfg.Fraction < 0 || limit <= 1 {
		return 0
	}
	per := max(1, int(math.Ceil(h.cfg.Fraction*float64(limit))))
	r := 0
	for _, s := range h.seen {
		if s.prio <= priority {
			break
		}
		if now.Sub(s.last) <= h.cfg.Window {
			r += per
		}
	}
	return min(r, limit-1)
}

// Admits reports whether a member with inFlight of limit may take a
// request of band priority at now (limit 0: no bound).
func (h *Headroom) Admits(priority, inFlight, limit int, now time.Time) bool {
	return limit <= 0 || inFlight < limit-h.Reserved(priority, limit, now)
}
