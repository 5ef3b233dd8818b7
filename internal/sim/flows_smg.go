package sim

import (
	"math"
	"time"
)

// smgGate is the SGLang Model Gateway's priority scheduler with its
// defaults (lightseekorg/smg, docs/concepts/reliability/priority-scheduling.md
// and docs/reference/priority-scheduler.md; the gateway formerly in
// sgl-project/sglang as sgl-model-gateway):
//
//   - four classes, system > interactive > default > bulk; the workload's
//     priorities map to interactive (> 0), default (0) and bulk (< 0);
//   - slots: the fleet's capacity, each replica's batch limit
//     (max-num-seqs); a request holds one from admission to its end;
//   - reservations: system 32, interactive max(128, ⌈0.25 × capacity⌉),
//     default ⌈0.10 × capacity⌉, bulk 0; a class may not take the unused
//     reservation of any class above it;
//   - per-class FIFO queues of 64/256/512/1024 requests (429 when full)
//     with timeouts 30/30/60/300 s (408), drained in strict class order;
//     a head that waited past its class's starvation threshold (5/5/30/120
//     s) is admitted first, into any free slot;
//   - system and interactive may preempt: with no slot for them, the most
//     recently admitted request of the lowest lower class that has no
//     first token yet is cancelled (503) and its slot taken;
//   - the engines get no priority; fair sharing is off by default, so a
//     class is FIFO across tenants.
type smgGate struct {
	gateLog
	capacity int
	reserved [smgClasses]int
	inflight [smgClasses]int
	queues   [smgClasses][]*flight
	admitted []*flight // in admission order, for picking a victim
}

const smgClasses = 4 // system, interactive, default, bulk (index = rank)

var (
	smgQueueSize  = [smgClasses]int{64, 256, 512, 1024}
	smgTimeout    = [smgClasses]time.Duration{30 * time.Second, 30 * time.Second, 60 * time.Second, 300 * time.Second}
	smgStarvation = [smgClasses]time.Duration{5 * time.Second, 5 * time.Second, 30 * time.Second, 120 * time.Second}
	smgPreempts   = [smgClasses]bool{true, true, false, false}
)

// smgState is a request's place in the scheduler.
type smgState struct {
	class    int
	enq      time.Time
	admitted bool
	first    bool
}

func newSMGGate(f *fleet) (flowGate, error) {
	g := &smgGate{gateLog: newGateLog(f), capacity: len(f.active) * f.w.Engine.MaxNumSeqs}
	c := float64(g.capacity)
	g.reserved = [smgClasses]int{32, max(128, int(math.Ceil(0.25*c))), int(math.Ceil(0.10 * c)), 0}
	return g, nil
}

func smgClass(priority int) int {
	switch {
	case priority > 0:
		return 1
	case priority == 0:
		return 2
	}
	return 3
}

// free is the slots class c may take: those not in flight and not held
// for the unused reservations of the classes above it.
func (g *smgGate) free(c int) int {
	n := g.capacity
	for k := range smgClasses {
		n -= g.inflight[k]
		if k < c {
			n -= max(0, g.reserved[k]-g.inflight[k])
		}
	}
	return n
}

func (g *smgGate) arrive(fl *flight, now time.Time) {
	g.at(now)
	st := &smgState{class: smgClass(fl.req.Priority), enq: now}
	fl.gate = st
	c := st.class
	if len(g.queues[c]) == 0 && g.free(c) > 0 {
		g.admit(fl, now)
		return
	}
	if smgPreempts[c] && len(g.queues[c]) == 0 && g.preempt(c, now) {
		g.admit(fl, now)
		return
	}
	g.l.held++
	if len(g.queues[c]) >= smgQueueSize[c] {
		g.shed(fl, now) // 429
		return
	}
	g.queues[c] = append(g.queues[c], fl)
}

func (g *smgGate) admit(fl *flight, now time.Time) {
	st := fl.gate.(*smgState)
	st.admitted = true
	g.inflight[st.class]++
	g.admitted = append(g.admitted, fl)
	g.f.route(fl, now)
}

// preempt cancels the most recently admitted request of the lowest class
// below c that has not had its first token, if there is one.
func (g *smgGate) preempt(c int, now time.Time) bool {
	for low := smgClasses - 1; low > c; low-- {
		for i := len(g.admitted) - 1; i >= 0; i-- {
			v := g.admitted[i]
			st := v.gate.(*smgState)
			if st.class != low || st.first {
				continue
			}
			g.drop(v)
			if v.engID != 0 && g.f.reps[v.replica].flights[v.engID] == v {
				g.cancel(v, now)
			} else {
				g.unqueue(v)
				g.shed(v, now)
			}
			return true
		}
	}
	return false
}

// unqueue takes v out of its router's queue, where it waits for a replica.
func (g *smgGate) unqueue(v *flight) {
	q := g.f.queues[v.router]
	for i, x := range q {
		if x == v {
			g.f.queues[v.router] = append(q[:i:i], q[i+1:]...)
			return
		}
	}
}

// drop releases v's slot.
func (g *smgGate) drop(v *flight) {
	st := v.gate.(*smgState)
	g.inflight[st.class]--
	for i, x := range g.admitted {
		if x == v {
			g.admitted = append(g.admitted[:i], g.admitted[i+1:]...)
			break
		}
	}
}

func (g *smgGate) firstToken(fl *flight, at time.Time) {
	g.gateLog.firstToken(fl, at)
	fl.gate.(*smgState).first = true
}

func (g *smgGate) finished(fl *flight, at time.Time, out int) {
	g.gateLog.finished(fl, at, out)
	g.drop(fl)
}

// wake times out waiters, admits starved heads (lowest class first), then
// drains the queues in class order.
func (g *smgGate) wake(now time.Time) {
	g.at(now)
	for c := range smgClasses {
		q := g.queues[c]
		k := 0
		for k < len(q) && now.Sub(q[k].gate.(*smgState).enq) >= smgTimeout[c] {
			g.shed(q[k], now) // 408
			k++
		}
		g.queues[c] = q[k:]
	}
	for c := smgClasses - 1; c >= 0; c-- {
		for len(g.queues[c]) > 0 && now.Sub(g.queues[c][0].gate.(*smgState).enq) >= smgStarvation[c] && g.free(0) > 0 {
			g.pop(c, now)
		}
	}
	for c := range smgClasses {
		for len(g.queues[c]) > 0 && g.free(c) > 0 {
			g.pop(c, now)
		}
	}
}

func (g *smgGate) pop(c int, now time.Time) {
	fl := g.queues[c][0]
	g.queues[c][0] = nil
	g.queues[c] = g.queues[c][1:]
	g.admit(fl, now)
}

// next is the earliest timeout or starvation promotion of a queue head.
func (g *smgGate) next() (time.Time, bool) {
	var t time.Time
	ok := false
	for c := range smgClasses {
		if len(g.queues[c]) == 0 {
			continue
		}
		enq := g.queues[c][0].gate.(*smgState).enq
		for _, d := range []time.Duration{smgStarvation[c], smgTimeout[c]} {
			// A head already past its starvation threshold waits for a
			// slot to free, not for a timer.
			if at := enq.Add(d); at.After(g.now) && (!ok || at.Before(t)) {
				t, ok = at, true
			}
		}
	}
	return t, ok
}

func (g *smgGate) timer(now time.Time) { g.wake(now) }

func (g *smgGate) enginePriority(*flight) int { return 0 }
