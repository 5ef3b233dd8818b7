package route

func init() {
	register("prefix-aware", policyEntry{build: func(c Config) policy { return prefixAware{chain: !c.DisableSpillChain} }})
}

// prefixAware is the stateless ring policy: the key's home on the ring while it is
// below its bound, else the homes of the spill keys (longer shared prefixes,
// so related requests spill to the same secondary), else the next candidate
// clockwise with room.
type prefixAware struct{ chain bool }

func (prefixAware) placesByKey() {}

func (p prefixAware) pick(e *pickEnv, req *Request) result {
	return p.pickKey(e, req, req.Key)
}

// pickKey places req as if its key were key (prefix-index's cold path).
func (p prefixAware) pickKey(e *pickEnv, req *Request, key uint64) result {
	hv, home := e.firstCandidate(key, req.Model)
	if home < 0 {
		return result{status: noCandidates}
	}
	lim := e.limit(home, true)
	if l, ok := e.take(home, lim, "home"); ok {
		return result{idx: home, home: home, reason: ReasonAffinity, load: l, bound: lim}
	}
	return p.spill(e, req, hv, home)
}

// spill is the path taken when the home is full, kept out of pick so the
// affinity path's frame stays small.
func (p prefixAware) spill(e *pickEnv, req *Request, hv int, home int32) result {
	rg := e.s.ring
	var small [64]uint64 // a visited set for up to 4,096 members without allocating
	seen := bitset(small[:])
	if words := (len(e.s.members) + 63) / 64; words > len(small) {
		seen = make(bitset, words)
	}
	seen.set(home)
	visited := 1 // distinct candidates tried
	if p.chain {
		for k, sk := range req.SpillKeys {
			_, c := e.firstCandidate(sk, req.Model)
			if c < 0 || seen.has(c) {
				continue
			}
			seen.set(c)
			visited++
			lim := e.limit(c, true)
			if l, ok := e.take(c, lim, "spill-chain"); ok {
				return result{idx: c, home: home, reason: ReasonSpillChain, dist: k + 1, load: l, bound: lim}
			}
		}
	}
	n := len(rg.vn)
	j, dist := hv, 0
	for step := 1; step < n && visited < e.n; step++ {
		if j++; j == n {
			j = 0
		}
		o := int32(rg.vn[j].owner)
		if seen.has(o) {
			continue
		}
		seen.set(o)
		if !e.candidate(o, req.Model) {
			if e.ex != nil {
				e.ex.skipNot(e.s.members[o].name, "walk", e.notCandidate(o, req.Model))
			}
			continue
		}
		visited++
		dist++
		lim := e.limit(o, true)
		if l, ok := e.take(o, lim, "walk"); ok {
			return result{idx: o, home: home, reason: ReasonSpill, dist: dist, load: l, bound: lim}
		}
	}
	return result{status: saturated, home: home}
}

type bitset []uint64

func (b bitset) set(i int32)      { b[i>>6] |= 1 << (i & 63) }
func (b bitset) has(i int32) bool { return b[i>>6]&(1<<(i&63)) != 0 }
