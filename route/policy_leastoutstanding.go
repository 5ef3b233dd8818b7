package route

func init() {
	register("least-outstanding", policyEntry{build: func(Config) policy { return leastOutstanding{} }})
}

// leastOutstanding sends each request to the candidate with the fewest
// requests in flight, breaking ties uniformly at random, as long as that is
// below its threshold. It ignores keys: it is the cache-blind baseline.
type leastOutstanding struct{}

func (leastOutstanding) pick(e *pickEnv, req *Request) result {
	ms := e.s.members
	rnd := e.r.rand()
	// Each failed take means another pick charged that member first, so the
	// system made progress; retry with fresh loads a bounded number of times.
	for attempt := 0; attempt <= len(ms)+4; attempt++ {
		best, cands := int32(-1), 0
		var bestLoad int64
		ties := uint64(0)
		for i := range ms {
			if !e.candidate(int32(i), req.Model) {
				continue
			}
			cands++
			l := ms[i].st.load()
			if l >= ms[i].threshold {
				continue
			}
			switch {
			case best < 0 || l < bestLoad:
				best, bestLoad, ties = int32(i), l, 1
			case l == bestLoad:
				// Reservoir sampling: the k-th tie replaces the choice with
				// probability 1/k, so every tie is equally likely.
				ties++
				rnd = splitmix(rnd + 0x9e3779b97f4a7c15)
				if rnd%ties == 0 {
					best = int32(i)
				}
			}
		}
		if cands == 0 {
			return result{status: noCandidates, home: -1}
		}
		if best < 0 {
			return result{status: saturated, home: -1}
		}
		lim := ms[best].threshold
		if l, ok := e.take(best, lim, "least-outstanding"); ok {
			return result{idx: best, home: -1, reason: ReasonLeastOutstanding, load: l, bound: lim}
		}
	}
	return result{status: saturated, home: -1}
}
