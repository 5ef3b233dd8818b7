package flowcontrol

import "slices"

// Charge adds served work to f's counter: promptTokens weighted by the
// policy's prompt weight plus outputTokens. Call it for work dispatched
// without Pop (prompt tokens) and for output tokens as they are served.
// Negative counts are ignored. Once f is known it allocates nothing.
func (q *Queue) Charge(f Flow, promptTokens, outputTokens int) {
	fs := q.flow(f)
	if fs == nil {
		return
	}
	q.charge(fs, promptTokens, outputTokens)
	if fs.idle {
		q.unidle(fs)
		q.toIdle(fs) // most recently used
	}
}

func (q *Queue) charge(fs *flowState, prompt, out int) {
	prompt, out = max(prompt, 0), max(out, 0)
	fs.prompt += int64(prompt)
	fs.out += int64(out)
	fs.counter += q.p.promptW*float64(prompt) + float64(out)
	if fs.hidx >= 0 {
		fs.b.fix(fs.hidx)
		return
	}
	// Work served while its band has no backlog moves the band's virtual
	// time: when contention starts, every flow starts level, so no flow
	// carries a debt for work it was given when nobody waited.
	if b := q.band(fs.flow.Priority); b != nil && len(b.heap) == 0 {
		b.floor = max(b.floor, fs.counter)
	}
}

// Served returns the prompt and output tokens charged to f while it was
// tracked; ok is false if f is not tracked.
func (q *Queue) Served(f Flow) (prompt, output int64, ok bool) {
	fs, ok := q.flows[f]
	if !ok {
		return 0, 0, false
	}
	return fs.prompt, fs.out, true
}

// Counter returns f's virtual token counter; ok is false if f is not
// tracked.
func (q *Queue) Counter(f Flow) (float64, bool) {
	fs, ok := q.flows[f]
	if !ok {
		return 0, false
	}
	return fs.counter, true
}

// flow returns f's state, tracking f if needed: when MaxFlows flows are
// tracked the least recently used idle one is forgotten; nil when every
// tracked flow has queued items.
func (q *Queue) flow(f Flow) *flowState {
	if fs, ok := q.flows[f]; ok {
		return fs
	}
	var fs *flowState
	if len(q.flows) >= q.p.maxFlows {
		fs = q.idleHead
		if fs == nil {
			return nil
		}
		q.unidle(fs)
		delete(q.flows, fs.flow)
		*fs = flowState{}
	} else {
		fs = &flowState{}
	}
	fs.flow, fs.hidx = f, -1
	q.flows[f] = fs
	q.toIdle(fs)
	return fs
}

func (q *Queue) toIdle(fs *flowState) {
	fs.idle = true
	fs.lprev, fs.lnext = q.idleTail, nil
	if q.idleTail != nil {
		q.idleTail.lnext = fs
	} else {
		q.idleHead = fs
	}
	q.idleTail = fs
}

func (q *Queue) unidle(fs *flowState) {
	if !fs.idle {
		return
	}
	if fs.lprev != nil {
		fs.lprev.lnext = fs.lnext
	} else {
		q.idleHead = fs.lnext
	}
	if fs.lnext != nil {
		fs.lnext.lprev = fs.lprev
	} else {
		q.idleTail = fs.lprev
	}
	fs.lprev, fs.lnext, fs.idle = nil, nil, false
}

// band returns the band at priority, creating it; nil when MaxBands bands
// exist.
func (q *Queue) band(prio int) *band {
	for _, b := range q.bands {
		if b.prio == prio {
			return b
		}
	}
	if len(q.bands) >= MaxBands {
		return nil
	}
	b := &band{prio: prio, lim: q.p.Band(prio)}
	i, _ := slices.BinarySearchFunc(q.bands, prio, func(x *band, p int) int { return p - x.prio })
	q.bands = slices.Insert(q.bands, i, b)
	return b
}

// Position is where a queued item stands.
type Position struct {
	// Priority is the item's band.
	Priority int
	// AheadHigher is the number of items queued in higher bands.
	AheadHigher int
	// BandQueued is the number of items queued in the item's band.
	BandQueued int
	// AheadInFlow is the number of its flow's items ahead of it, counted
	// up to MaxPositionWalk.
	AheadInFlow int
}

// MaxPositionWalk bounds the walk Position makes along a flow.
const MaxPositionWalk = 1000

// Position tells where it stands; the zero Position if it is not queued.
func (q *Queue) Position(it *Item) Position {
	if it.q != q {
		return Position{}
	}
	p := Position{Priority: it.b.prio, BandQueued: it.b.n}
	for _, b := range q.bands {
		if b == it.b {
			break
		}
		p.AheadHigher += b.n
	}
	for x := it.fprev; x != nil && p.AheadInFlow < MaxPositionWalk; x = x.fprev {
		p.AheadInFlow++
	}
	return p
}

func (b *band) less(i, j int) bool {
	x, y := b.heap[i], b.heap[j]
	return x.counter < y.counter || x.counter == y.counter && x.seq < y.seq
}

func (b *band) swap(i, j int) {
	b.heap[i], b.heap[j] = b.heap[j], b.heap[i]
	b.heap[i].hidx, b.heap[j].hidx = i, j
}

func (b *band) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !b.less(i, p) {
			return
		}
		b.swap(i, p)
		i = p
	}
}

func (b *band) down(i int) bool {
	start, n := i, len(b.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && b.less(r, l) {
			m = r
		}
		if !b.less(m, i) {
			break
		}
		b.swap(i, m)
		i = m
	}
	return i > start
}

func (b *band) fix(i int) {
	if !b.down(i) {
		b.up(i)
	}
}

func (b *band) remove(i int) {
	last := len(b.heap) - 1
	fs := b.heap[i]
	if i != last {
		b.swap(i, last)
	}
	b.heap[last] = nil
	b.heap = b.heap[:last]
	if i != last {
		b.fix(i)
	}
	fs.hidx = -1
}

// Ahead is the number of items queued at priority or above: what a
// request of that priority pushed now would wait behind, at most.
func (q *Queue) Ahead(priority int) int {
	n := 0
	for _, b := range q.bands {
		if b.prio < priority {
			break
		}
		n += b.n
	}
	return n
}
