package route

func init() {
	register("consistent-hash", policyEntry{build: func(Config) policy { return consistentHash{} }})
}

// consistentHash is the reference the simulator compares against: always the
// key's home among candidates, ignoring load and thresholds. It never
// saturates; it still counts in-flight requests so Status and the bound of
// other routers sharing the fleet stay true.
type consistentHash struct{}

func (consistentHash) placesByKey() {}

func (consistentHash) pick(e *pickEnv, req *Request) result {
	_, home := e.firstCandidate(req.Key, req.Model)
	if home < 0 {
		return result{status: noCandidates}
	}
	l, _ := e.take(home, -1, "home")
	return result{idx: home, home: home, reason: ReasonAffinity, load: l}
}
