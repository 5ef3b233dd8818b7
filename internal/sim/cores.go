package sim

import (
	"fmt"
	"math"
	"time"
)

// Shared cores (Workload.Cores). A fleet of CPU engines on one machine
// (llama.cpp replicas with one thread each, as in the tests' real fleet)
// slows down when more replicas compute at once than the machine has
// cores: each busy replica then gets cores/busy of a core. The simulator
// models it by running every replica's engine on a clock of its own that
// advances at that fraction of the fleet's time while the fleet has more
// busy replicas than cores, so prefill, the per-request cost and decode
// steps all stretch alike. The speed changes only when a replica turns busy
// or idle, so each engine's clock is a piecewise-linear map of the fleet's
// time, rebased at every change.

// engineClock maps the fleet's time to one engine's: engine time tau0 at
// fleet time t0, advancing speed engine seconds per fleet second since.
type engineClock struct {
	t0, tau0 time.Time
	speed    float64
}

func (c engineClock) engineAt(t time.Time) time.Time {
	return c.tau0.Add(time.Duration(float64(t.Sub(c.t0)) * c.speed))
}

// wallAt is the first fleet time whose engine time is at least tau.
func (c engineClock) wallAt(tau time.Time) time.Time {
	return c.t0.Add(time.Duration(math.Ceil(float64(tau.Sub(c.tau0)) / c.speed)))
}

func checkCores(cores float64) error {
	if cores < 0 || math.IsNaN(cores) || math.IsInf(cores, 0) {
		return fmt.Errorf("sim: workload cores %v must be a positive number of cores, or 0 for a core per replica", cores)
	}
	return nil
}

// engineTime is replica rep's engine time at fleet time t (never before
// the engine's own clock, which a rounded map could fall a nanosecond
// behind).
func (f *fleet) engineTime(rep *replica, t time.Time) time.Time {
	if f.w.Cores == 0 {
		return t
	}
	tau := rep.clk.engineAt(t)
	if now := rep.eng.Now(); tau.Before(now) {
		return now
	}
	return tau
}

// fleetTime is the fleet time of replica rep's engine time tau.
func (f *fleet) fleetTime(rep *replica, tau time.Time) time.Time {
	if f.w.Cores == 0 {
		return tau
	}
	return rep.clk.wallAt(tau)
}

// setNext records rep's next engine event (engine time tau; ok false: the
// engine is idle).
func (f *fleet) setNext(rep *replica, tau time.Time, ok bool) {
	rep.nextTau, rep.busy = tau, ok
	rep.next = f.fleetTime(rep, tau)
}

// reclock sets every replica's speed for the busy replicas at fleet time
// now: min(1, cores/busy). Each clock is rebased at now, so engine time
// already passed keeps its fleet time, and each busy replica's next event
// moves to its fleet time at the new speed.
func (f *fleet) reclock(now time.Time) {
	if f.w.Cores == 0 {
		return
	}
	busy := 0
	for _, r := range f.reps {
		if r.busy {
			busy++
		}
	}
	speed := 1.0
	if float64(busy) > f.w.Cores {
		speed = f.w.Cores / float64(busy)
	}
	for _, r := range f.reps {
		if r.clk.speed == speed {
			continue
		}
		r.clk = engineClock{t0: now, tau0: f.engineTime(r, now), speed: speed}
		if r.busy {
			r.next = r.clk.wallAt(r.nextTau)
		}
	}
}
