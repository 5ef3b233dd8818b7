package sim

import (
	"fmt"
	"time"
)

// ReplayPolicy sends every request to the replica a recorded run sent it
// to (Request.Replica). It is not in PolicyNames: it is no router, it
// needs a workload that carries its placement (a replay of a real fleet's
// run), and it exists to compare a simulated engine with a real one on the
// same placement, so that where the recorded run happened to put things
// (one ring draw, one random balancer's draw) is in both sides of the
// comparison instead of being noise between them.
const ReplayPolicy = "replay"

// checkReplay tells why w cannot be replayed on n replicas: a request
// without a recorded replica, or one outside the fleet. Scale events would
// take recorded replicas away, so a replay has none.
func checkReplay(w *Workload, n int, scale []ScaleEvent) error {
	if len(scale) > 0 {
		return fmt.Errorf("sim: policy %s replays a recorded placement and takes no scale events", ReplayPolicy)
	}
	for i, r := range w.Requests {
		if !r.Placed {
			return fmt.Errorf("sim: policy %s: request %d (at %v) carries no recorded replica (Request.Placed)", ReplayPolicy, i, r.At.Round(time.Microsecond))
		}
		if r.Replica < 0 || r.Replica >= n {
			return fmt.Errorf("sim: policy %s: request %d (at %v) was placed on replica %d, outside 0..%d", ReplayPolicy, i, r.At.Round(time.Microsecond), r.Replica, n-1)
		}
	}
	return nil
}

// replayPicker places each request where the recorded run did. It never
// holds a request back: the recorded router had sent it.
type replayPicker struct{}

func (replayPicker) pick(f *flight) (int, bool)  { return f.req.Replica, true }
func (replayPicker) done(*flight)                {}
func (replayPicker) setMembers([]int) error      { return nil }
func (replayPicker) hint(active, inflight []int) {}
