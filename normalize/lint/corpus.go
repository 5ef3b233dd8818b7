package lint

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/prefixgate/prefixgate/normalize"
)

// Corpus rule thresholds; docs/lint.md explains them.
const (
	// splitMinShared is how much routing text related requests must share
	// before a difference inside the window counts as a split.
	splitMinShared = 256
	// splitMaxDiff bounds the differing run, in bytes of each variant, for
	// the difference to count as small.
	splitMaxDiff = 64
	// splitMinTail is how much text must match again after the difference:
	// a run that differs and then rejoins is an edit inside shared text; a
	// different ending is a different request (short-prompt covers that).
	splitMinTail = 64
	// hotMinCount and hotShareFactor: a key is hot when it carries at least
	// this many requests and more than this multiple of 1/replicas.
	hotMinCount    = 8
	hotShareFactor = 2.0
	// Suggested prefix length: within this many points of the best hit
	// rate, and at most this multiple of a replica's fair share.
	hitRateSlack  = 0.01
	maxShareBound = 1.25
)

// candidateLengths are the prefix lengths the suggestion considers.
var candidateLengths = []int{1024, 2048, 4096, 8192, 16384, 32768, 65536}

func corpusFindings(reqs []*request, opts Options) []Finding {
	var out []Finding
	out = append(out, splitGroups(reqs, opts)...)
	out = append(out, hotKeys(reqs, opts)...)
	return out
}

type variant struct {
	key  uint64
	reqs []*request
	text string // uncut routing text of the first request
}

// splitGroups finds requests that share the first splitMinShared units of
// routing text (and model and group) but get different keys because of a
// small difference inside the window.
func splitGroups(reqs []*request, opts Options) []Finding {
	type bucketKey struct {
		mode               normalize.Mode
		model, group, head string
	}
	buckets := map[bucketKey][]*request{}
	var order []bucketKey
	for _, r := range reqs {
		w := r.rt.cut(opts.PrefixLength)
		head := r.rt.cut(splitMinShared)
		if len(w) <= len(head) {
			continue // the window holds nothing past the shared head
		}
		k := bucketKey{r.mode, r.info.Model, r.info.Group, head}
		if _, ok := buckets[k]; !ok {
			order = append(order, k)
		}
		buckets[k] = append(buckets[k], r)
	}
	var out []Finding
	for _, k := range order {
		var vs []*variant
		byKey := map[uint64]*variant{}
		for _, r := range buckets[k] {
			v, ok := byKey[r.info.Key]
			if !ok {
				v = &variant{key: r.info.Key, text: r.rt.text}
				byKey[r.info.Key] = v
				vs = append(vs, v)
			}
			v.reqs = append(v.reqs, r)
		}
		if len(vs) < 2 {
			continue
		}
		// Group the variants that differ from the first by a small run.
		base := vs[0]
		group := []*variant{base}
		first := len(base.text)
		var sampleA, sampleB string
		for _, v := range vs[1:] {
			lcp, da, db := smallDiff(base.text, v.text)
			if da > splitMaxDiff || db > splitMaxDiff || len(base.text)-lcp-da < splitMinTail {
				continue
			}
			group = append(group, v)
			if lcp < first {
				first = lcp
				sampleA, sampleB = base.text[lcp:lcp+da], v.text[lcp:lcp+db]
			}
		}
		if len(group) < 2 {
			continue
		}
		var idx []int
		for _, v := range group {
			for _, r := range v.reqs {
				idx = append(idx, r.index)
			}
		}
		sort.Ints(idx)
		r0 := base.reqs[0]
		pos := r0.rt.measure(base.text[:first], false)
		f := Finding{
			RuleID: ruleSplitGroup, Severity: Warning, RequestIndex: corpusRequestIndex, Requests: idx,
			Message: fmt.Sprintf("%d requests (%s) share %d %s of routing text but split into %d keys at %s %d of the window: %q vs %q",
				len(idx), indexList(idx), pos, unitName(r0.mode), len(group), unitName(r0.mode)[:len(unitName(r0.mode))-1], pos, clip(sampleA, 40), clip(sampleB, 40)),
			Hint: "move the part that differs after the shared context (or out of the prompt); if the difference is meant to separate them, set a group id instead",
		}
		if seg, off := r0.rt.locate(pos); seg != nil {
			f.JSONPath, f.Offset, f.BodyOffset = seg.path, off, rawOffset(r0.body, seg.raw, off)
		}
		out = append(out, f)
	}
	return out
}

// smallDiff returns the common prefix length of a and b and the lengths of
// the runs that differ between that prefix and their common suffix.
func smallDiff(a, b string) (lcp, da, db int) {
	for lcp < len(a) && lcp < len(b) && a[lcp] == b[lcp] {
		lcp++
	}
	// Back up to a character boundary.
	for lcp > 0 && lcp < len(a) && a[lcp]&0xC0 == 0x80 {
		lcp--
	}
	lcs := 0
	for lcs < len(a)-lcp && lcs < len(b)-lcp && a[len(a)-1-lcs] == b[len(b)-1-lcs] {
		lcs++
	}
	for lcs > 0 && len(a)-lcs < len(a) && a[len(a)-lcs]&0xC0 == 0x80 {
		lcs--
	}
	return lcp, len(a) - lcp - lcs, len(b) - lcp - lcs
}

func indexList(idx []int) string {
	const show = 8
	var parts []string
	for i, v := range idx {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(idx)-show))
			break
		}
		parts = append(parts, strconv.Itoa(v))
	}
	return "requests " + strings.Join(parts, ", ")
}

// keysAt returns each request's key at prefix length n, the configured
// length reusing the key already computed.
func keysAt(reqs []*request, n int, opts Options) []uint64 {
	keys := make([]uint64, len(reqs))
	for i, r := range reqs {
		if n == opts.PrefixLength {
			keys[i] = r.info.Key
			continue
		}
		ri, err := normalize.RouteKey(r.canon, normalize.KeyOptions{Mode: r.mode, PrefixLength: n})
		if err == nil {
			keys[i] = ri.Key
		}
	}
	return keys
}

// hotKeys reports keys that carry more than hotShareFactor times a
// replica's fair share.
func hotKeys(reqs []*request, opts Options) []Finding {
	if len(reqs) == 0 {
		return nil
	}
	counts := map[uint64][]*request{}
	var order []uint64
	for _, r := range reqs {
		if _, ok := counts[r.info.Key]; !ok {
			order = append(order, r.info.Key)
		}
		counts[r.info.Key] = append(counts[r.info.Key], r)
	}
	fair := 1 / float64(opts.Replicas)
	var out []Finding
	for _, k := range order {
		rs := counts[k]
		share := float64(len(rs)) / float64(len(reqs))
		if len(rs) < hotMinCount || share <= hotShareFactor*fair {
			continue
		}
		idx := make([]int, len(rs))
		for i, r := range rs {
			idx[i] = r.index
		}
		hint := "the shared part is the whole routing text: give tenants or conversations group ids (X-Prefixgate-Group or prompt_cache_key), or rely on the router's bounded-load spill"
		if n := splittingLength(rs, len(reqs), opts); n > 0 {
			hint = fmt.Sprintf("--prefix-length %d spreads these requests over more keys (each at most %.0f%% of the corpus); or give tenants group ids", n, 100*hotShareFactor*fair)
		}
		r0 := rs[0]
		f := Finding{
			RuleID: ruleHotKey, Severity: Warning, RequestIndex: corpusRequestIndex, Requests: idx,
			Message: fmt.Sprintf("key %s carries %d of %d requests (%.0f%%), %.1f× the fair share of one of %d replicas (%s)",
				normalize.FormatKey(k), len(rs), len(reqs), 100*share, share/fair, opts.Replicas, indexList(idx)),
			Hint: hint,
		}
		if seg := firstSegment(r0.rt); seg != nil {
			f.JSONPath, f.BodyOffset = seg.path, rawOffset(r0.body, seg.raw, 0)
		}
		out = append(out, f)
	}
	return out
}

// splittingLength returns the shortest candidate prefix length above the
// configured one at which no key among rs carries more than
// hotShareFactor times the fair share of the corpus, or 0.
func splittingLength(rs []*request, total int, opts Options) int {
	limit := hotShareFactor * float64(total) / float64(opts.Replicas)
	for _, n := range candidateLengths {
		if n <= opts.PrefixLength {
			continue
		}
		counts := map[uint64]int{}
		worst := 0
		for _, k := range keysAt(rs, n, opts) {
			counts[k]++
			worst = max(worst, counts[k])
		}
		if float64(worst) <= limit {
			return n
		}
	}
	return 0
}

// evaluate computes the expected hit rate and balance at prefix length n.
// The hit rate counts a request as a hit when an earlier request had its
// key, weighted by the share of its prompt (routing text) inside the
// window; the balance is the largest key's share times the replica count.
func evaluate(reqs []*request, n int, opts Options) Candidate {
	c := Candidate{PrefixLength: n}
	if len(reqs) == 0 {
		return c
	}
	seen := map[uint64]int{}
	worst := 0
	var hit float64
	for i, k := range keysAt(reqs, n, opts) {
		if seen[k] > 0 {
			l := reqs[i].rt.units
			if l == 0 {
				hit++
			} else {
				hit += float64(min(l, n)) / float64(l)
			}
		}
		seen[k]++
		worst = max(worst, seen[k])
	}
	c.Keys = len(seen)
	c.HitRate = hit / float64(len(reqs))
	c.MaxShare = float64(worst) / float64(len(reqs)) * float64(opts.Replicas)
	return c
}

// summarize picks the suggested prefix length: the longest candidate whose
// hit rate is within hitRateSlack of the best and whose largest key stays
// within maxShareBound of a fair share; when none does, the most balanced
// of those near the best hit rate.
func summarize(reqs []*request, opts Options) Summary {
	s := Summary{PrefixLength: opts.PrefixLength, Replicas: opts.Replicas}
	keys := map[uint64]bool{}
	for _, r := range reqs {
		keys[r.info.Key] = true
	}
	s.Keys = len(keys)
	best := 0.0
	for _, n := range candidateLengths {
		c := evaluate(reqs, n, opts)
		s.Candidates = append(s.Candidates, c)
		best = max(best, c.HitRate)
	}
	var pick *Candidate
	for i := range s.Candidates {
		c := &s.Candidates[i]
		if c.HitRate < best-hitRateSlack {
			continue
		}
		if c.MaxShare <= maxShareBound {
			pick = c // candidates ascend, so the last one wins
		}
	}
	if pick == nil {
		for i := range s.Candidates {
			c := &s.Candidates[i]
			if c.HitRate >= best-hitRateSlack && (pick == nil || c.MaxShare <= pick.MaxShare) {
				pick = c
			}
		}
	}
	if pick != nil {
		s.SuggestedPrefixLength = pick.PrefixLength
		s.ExpectedHitRate = round4(pick.HitRate)
		s.ExpectedMaxShareRatio = round4(pick.MaxShare)
	}
	for i := range s.Candidates {
		s.Candidates[i].HitRate = round4(s.Candidates[i].HitRate)
		s.Candidates[i].MaxShare = round4(s.Candidates[i].MaxShare)
	}
	return s
}

func round4(v float64) float64 {
	return float64(int64(v*10000+0.5)) / 10000
}
