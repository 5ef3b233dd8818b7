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
	// (before and after the difference together) for a difference inside
	// the window to count as a split.
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

// splitGroups finds requests (same mode, model and group) whose routing
// texts are identical except for one small run anywhere — at the first
// character or deep inside — and that get different keys because of it.
//
// Two texts that differ by one run followed by at least splitMinTail
// identical units end the same, so requests are bucketed by the last
// splitMinTail bytes of their routing text: each request lands in one
// bucket, and the bucket's variants are compared with a representative in
// linear time. A bucket holding several unrelated groups is searched for at
// most maxSplitRounds representatives, which bounds the work by that many
// passes over the corpus whatever its shape.
func splitGroups(reqs []*request, opts Options) []Finding {
	type bucketKey struct {
		mode               normalize.Mode
		model, group, tail string
	}
	buckets := map[bucketKey][]*request{}
	var order []bucketKey
	for _, r := range reqs {
		t := r.rt.text
		if len(t) < splitMinShared {
			continue
		}
		k := bucketKey{r.mode, r.info.Model, r.info.Group, t[len(t)-splitMinTail:]}
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
		for round := 0; round < maxSplitRounds && len(vs) >= 2; round++ {
			var f *Finding
			f, vs = splitGroup(vs)
			if f != nil {
				out = append(out, *f)
			}
		}
	}
	return out
}

// maxSplitRounds bounds how many representatives one bucket is compared
// with.
const maxSplitRounds = 8

// splitGroup groups the variants that differ from vs[0] by one small run,
// and returns the finding (nil for a group of one) and the variants left.
func splitGroup(vs []*variant) (*Finding, []*variant) {
	base := vs[0]
	group := []*variant{base}
	var rest []*variant
	first, shared := len(base.text), len(base.text)
	var sampleA, sampleB string
	for _, v := range vs[1:] {
		lcp, da, db := smallDiff(base.text, v.text)
		if da > splitMaxDiff || db > splitMaxDiff || len(base.text)-lcp-da < splitMinTail || len(base.text)-da < splitMinShared {
			rest = append(rest, v)
			continue
		}
		group = append(group, v)
		shared = min(shared, len(base.text)-da)
		if lcp < first {
			first = lcp
			sampleA, sampleB = base.text[lcp:lcp+da], v.text[lcp:lcp+db]
		}
	}
	if len(group) < 2 {
		return nil, rest
	}
	var idx []int
	for _, v := range group {
		for _, r := range v.reqs {
			idx = append(idx, r.index)
		}
	}
	sort.Ints(idx)
	r0 := base.reqs[0]
	unit := unitName(r0.mode)
	f := Finding{
		RuleID: ruleSplitGroup, Severity: Warning, RequestIndex: corpusRequestIndex, Requests: idx,
		Message: fmt.Sprintf("%d requests (%s) share all but a few characters of their routing text (%d %s in common) yet get %d keys: they differ at this position, %s vs %s",
			len(idx), indexList(idx), r0.rt.measure(base.text[:shared], false), unit, len(group), quoteSample(sampleA), quoteSample(sampleB)),
		Hint: "move the part that differs after the shared context (into the final message, or out of the prompt); if the difference is meant to separate them, set a group id instead",
	}
	if first < splitMinShared {
		f.Hint = "a value at the start of the prompt (a time, a name, a counter) splits every key: move it after the shared context (into the final message, or out of the prompt); if it is meant to separate them, set a group id instead"
	}
	pos := r0.rt.measure(base.text[:first], false)
	if seg, off := r0.rt.locate(pos); seg != nil {
		f.JSONPath, f.Offset, f.BodyOffset = seg.path, off, rawOffset(r0.body, seg.raw, off)
	}
	return &f, rest
}

// quoteSample quotes one side of a difference; an empty side (an
// insertion) is shown as such.
func quoteSample(s string) string {
	if s == "" {
		return "(nothing)"
	}
	return strconv.Quote(clip(s, 40))
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

// hotKeys reports keys whose load the router cannot serve from cache.
//
// One key carrying most of the traffic is what prefix-aware routing is
// built for when its requests share their whole routing text (one document,
// different questions): the key's home takes up to the bounded-load limit
// and the rest spills, first along the spill chain, and every replica it
// spills to caches the same text. The load cannot be served that way when
// the requests only look alike inside the window and differ after it: the
// home's cache holds one of their texts, and spilled requests land where
// nothing of theirs is cached. So a key is hot when it carries at least
// hotMinCount requests, more than hotShareFactor times a replica's fair
// share, and its requests' routing texts differ past the window.
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
		if len(rs) < hotMinCount || share <= hotShareFactor*fair || sameText(rs) {
			continue
		}
		idx := make([]int, len(rs))
		for i, r := range rs {
			idx[i] = r.index
		}
		hint := "the requests differ only past the longest window: give tenants or conversations group ids (X-Prefixgate-Group or prompt_cache_key)"
		if n := splittingLength(rs, len(reqs), opts); n > 0 {
			hint = fmt.Sprintf("--prefix-length %d spreads these requests over more keys (each at most %.0f%% of the corpus); or give tenants group ids", n, 100*hotShareFactor*fair)
		}
		r0 := rs[0]
		f := Finding{
			RuleID: ruleHotKey, Severity: Warning, RequestIndex: corpusRequestIndex, Requests: idx,
			Message: fmt.Sprintf("key %s carries %d of %d requests (%.0f%%), %.1f× the fair share of one of %d replicas (%s), and their routing texts differ after the window, so the replicas its load spills to have nothing of theirs cached",
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

// sameText reports whether every request in rs has the same routing text
// as the first, in one pass over their texts.
func sameText(rs []*request) bool {
	for _, r := range rs[1:] {
		if r.rt.text != rs[0].rt.text {
			return false
		}
	}
	return true
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
	if best == 0 && len(reqs) > 0 {
		// Every candidate gives every request its own key: no length
		// helps, and suggesting one would promise a hit rate of nothing.
		// Say where the requests part instead.
		pick = nil
		s.Advice = noSharingAdvice(reqs, opts)
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

// noSharingAdvice explains a corpus in which no two requests share a key at
// any candidate length: it finds the pair of requests (same model and group)
// whose routing texts share the longest start, by sorting the starts of
// the texts (at most the smallest candidate window each, so the sort costs
// O(R log R) comparisons of bounded length), and says where they part.
func noSharingAdvice(reqs []*request, opts Options) string {
	if len(reqs) < 2 {
		return "no suggested prefix length: a corpus of one request cannot show sharing"
	}
	type head struct {
		scope string
		text  string
		r     *request
	}
	heads := make([]head, len(reqs))
	for i, r := range reqs {
		heads[i] = head{fmt.Sprintf("%d\x00%s\x00%s", r.mode, r.info.Model, r.info.Group), r.rt.cut(candidateLengths[0]), r}
	}
	sort.Slice(heads, func(i, j int) bool {
		if heads[i].scope != heads[j].scope {
			return heads[i].scope < heads[j].scope
		}
		return heads[i].text < heads[j].text
	})
	bestLCP, bi := -1, 0
	for i := 1; i < len(heads); i++ {
		if heads[i].scope != heads[i-1].scope {
			continue
		}
		a, b := heads[i-1].text, heads[i].text
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		if n > bestLCP {
			bestLCP, bi = n, i
		}
	}
	if bestLCP < 0 {
		return "no suggested prefix length: no two requests have the same model and group, so no length lets them share a key"
	}
	a, b := heads[bi-1], heads[bi]
	for bestLCP > 0 && bestLCP < len(a.text) && a.text[bestLCP]&0xC0 == 0x80 {
		bestLCP--
	}
	ra, rb := min(a.r.index, b.r.index), max(a.r.index, b.r.index)
	at := a.r.rt.measure(a.text[:bestLCP], false)
	where := fmt.Sprintf("%s %d of the routing text", unitName(a.r.mode)[:len(unitName(a.r.mode))-1], at)
	if seg, off := a.r.rt.locate(at); seg != nil {
		where = fmt.Sprintf("%s@%d", seg.path, off)
	}
	return fmt.Sprintf("no suggested prefix length: every request gets its own key at every length; even the two closest requests (%d and %d) part at %s (%s vs %s); fix what differs there and lint again",
		ra, rb, where, quoteSample(clip(a.text[bestLCP:], 12)), quoteSample(clip(b.text[bestLCP:], 12)))
}

func round4(v float64) float64 {
	return float64(int64(v*10000+0.5)) / 10000
}
