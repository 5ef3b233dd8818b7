package route

func init() {
	register("random", policyEntry{build: func(Config) policy { return randomPolicy{} }})
}

// randomPolicy sends each request to a uniformly random candidate below its
// threshold: the cache-blind baseline SageMaker calls RANDOM.
type randomPolicy struct{}

func (randomPolicy) pick(e *pickEnv, req *Request) result {
	ms := e.s.members
	if len(ms) == 0 {
		return result{status: noCandidates, home: -1}
	}
	rnd := e.r.rand()
	// A few independent draws are uniform over candidates with room whenever
	// one of them lands; the scan after them keeps the policy total when
	// most members are full or not candidates.
	for try := 0; try < 8; try++ {
		rnd = splitmix(rnd + 0x9e3779b97f4a7c15)
		i := int32(rnd % uint64(len(ms)))
		if !e.candidate(i, req.Model) {
			continue
		}
		lim := ms[i].threshold
		if l, ok := e.take(i, lim, "random"); ok {
			return result{idx: i, home: -1, reason: ReasonRandom, load: l, bound: lim}
		}
	}
	start := int(rnd>>32) % len(ms)
	cands := 0
	for k := range ms {
		i := int32((start + k) % len(ms))
		if !e.candidate(i, req.Model) {
			continue
		}
		cands++
		lim := ms[i].threshold
		if l, ok := e.take(i, lim, "random"); ok {
			return result{idx: i, home: -1, reason: ReasonRandom, load: l, bound: lim}
		}
	}
	if cands == 0 {
		return result{status: noCandidates, home: -1}
	}
	return result{status: saturated, home: -1}
}
