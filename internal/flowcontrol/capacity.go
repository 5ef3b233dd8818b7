package flowcontrol

import "time"

// capacity is what a Room has learned of a member's engine: how many
// requests it runs at once before it queues. A scrape that shows the
// engine queueing more than the saturation threshold while running n, or
// queueing any while it holds the whole capacity (running plus waiting),
// sets it to n; a scrape that shows it running more raises it; one that
// shows it running the whole capacity with nothing waiting raises it by
// one, so a capacity learned while long prompts filled the KV cache comes
// back up. A scrape that catches a request between its arrival and the
// engine's next scheduling step (a few waiting, room to run them) teaches
// nothing.
type capacity struct {
	at    time.Time // the scrape last read
	slots int       // 0 while unknown
	// ok is the most requests a scrape showed the engine running while
	// it queued no more than the saturation threshold (MaxWaiting);
	// asked is when a fresh scrape was last asked for.
	ok    int
	asked time.Time
}

func (c *capacity) learn(s Scrape, maxWaiting int) {
	if !s.Known || s.At.Equal(c.at) {
		return
	}
	c.at = s.At
	if (maxWaiting < 0 || s.Waiting <= maxWaiting) && s.Running > c.ok {
		c.ok = s.Running
	}
	switch {
	case s.Running <= 0:
	case maxWaiting >= 0 && s.Waiting > maxWaiting:
		c.slots = s.Running
	case c.slots > 0 && s.Waiting > 0 && s.Running+s.Waiting >= c.slots:
		c.slots = s.Running
	case c.slots > 0 && s.Running > c.slots:
		c.slots = s.Running
	case c.slots > 0 && s.Waiting == 0 && s.Running >= c.slots:
		c.slots++
	}
}

// probe is the in-flight bound of a member whose capacity is not known.
func (c *capacity) probe() int { return c.ok + max(MinProbeStep, c.ok/2) }
