package flowgate

// Reconfigure puts the gate under cfg while it runs. cfg is validated
// first (errors name the setting, flow_control.KEY, as New's do) and an
// invalid one changes nothing. Then, at once for every request:
//
//   - Identify resolves objectives and tenants by cfg, so an objective
//     cfg drops is refused with a 400 and one it adds is accepted;
//   - every model's queue takes cfg's policy and keeps every queued
//     request, those of a band whose objective cfg drops included
//     (flowcontrol.Queue.SetPolicy: new caps apply to arrivals, new TTLs
//     to the expiry of waiting requests);
//   - admission judges members by cfg's thresholds and headroom, keeping
//     what the gate learned of each engine (flowcontrol.Room.SetConfig).
//
// With flow control turned off, callers bypass the gate (Enabled) while
// the dispatcher still serves every request already queued; turned on,
// new requests go through the gate. flow_control.metric_flows applies at
// start only: the metrics keep the number of flow labels they started
// with. The dispatcher is woken to serve the queues under cfg.
func (g *Gate) Reconfigure(cfg Config) error {
	c, err := cfg.compile()
	if err != nil {
		return err
	}
	if err := g.reconfigure(&c); err != nil {
		return err
	}
	g.wake()
	return nil
}

func (g *Gate) reconfigure(c *compiled) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.c.Load()
	if err := g.room.SetConfig(g.roomConfigLocked(c)); err != nil {
		return err
	}
	if c.cfg.MetricFlows != old.cfg.MetricFlows {
		if g.log != nil {
			g.log.Warn("flow_control.metric_flows applies at start only; the metrics keep their flow labels",
				"metric_flows", old.cfg.MetricFlows, "configured", c.cfg.MetricFlows)
		}
		c.cfg.MetricFlows = old.cfg.MetricFlows
	}
	for _, q := range g.queues {
		q.SetPolicy(c.policy)
	}
	g.c.Store(c)
	return nil
}
