package lint

import (
	"unicode/utf8"

	"github.com/prefixgate/prefixgate/normalize"
)

// segment is a run of the routing text that came from one JSON value.
type segment struct {
	path string
	// text is the decoded string (or the literal of a number) the segment
	// holds; offsets in findings are characters of this text.
	text string
	// start is where the segment begins in the routing text: characters
	// in chat and completion mode, bytes in native mode.
	start int
	// escaped says that the routing text holds text in its canonical JSON
	// form (native bodies, tools, non-text parts), so that positions in the
	// window count escape sequences.
	escaped bool
	raw     *node // the value as sent, for body offsets; nil if not found
}

// routingText is the routing text of one request, as package normalize
// lays it out, with the JSON value each part came from.
type routingText struct {
	mode  normalize.Mode
	text  string // the whole routing text, uncut
	units int    // its length: characters, or bytes in native mode
	segs  []segment
	// whole is true when the text covers the whole prompt: a completion
	// prompt or a lone message, nothing held back.
	whole bool
}

// pos returns the position in the routing text of byte b of seg.text.
func (rt *routingText) pos(seg *segment, b int) int {
	return seg.start + rt.measure(seg.text[:b], seg.escaped)
}

func (rt *routingText) measure(s string, escaped bool) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			w := 1
			if escaped {
				switch {
				case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
					w = 2
				case c < 0x20:
					w = 6
				}
			}
			n += w
			i++
			continue
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		if rt.mode == normalize.ModeNative {
			n += w
		} else {
			n++
		}
		i += w
	}
	return n
}

// cut returns the routing text cut to n units.
func (rt *routingText) cut(n int) string {
	if rt.mode == normalize.ModeNative {
		return rt.text[:min(n, len(rt.text))]
	}
	k := 0
	for i := range rt.text {
		if k == n {
			return rt.text[:i]
		}
		k++
	}
	return rt.text
}

// locate maps a position in the routing text to the segment that holds it
// and the character offset inside that segment's text.
func (rt *routingText) locate(p int) (*segment, int) {
	var best *segment
	for i := range rt.segs {
		s := &rt.segs[i]
		if s.start <= p && p <= s.start+rt.measure(s.text, s.escaped) {
			best = s
		}
	}
	if best == nil {
		return nil, 0
	}
	// Walk characters until the position is reached.
	off, at := 0, best.start
	for b, r := range best.text {
		if at >= p {
			return best, off
		}
		at += rt.measure(best.text[b:b+utf8.RuneLen(max(r, 0))], best.escaped)
		off++
	}
	return best, off
}

// buildRoutingText takes the routing text of a canonical body in mode
// (never ModeAuto) from package normalize, laid out by the code that keys
// it, and finds the JSON value of each of its segments in the canonical
// tree (and in the body as sent, for body offsets). A segment that holds
// canonical JSON (tools, non-text parts, native members) becomes a
// segment for every string and number inside it, so that findings name
// the innermost value. Positions are measured from the previous segment
// on, never from the start: that would be quadratic in a long text.
func buildRoutingText(mode normalize.Mode, canon []byte, ctree, rtree *node) *routingText {
	rt := &routingText{mode: mode}
	lay, err := normalize.LayOutRoutingText(canon, mode)
	if err != nil {
		return rt // the canonical body read back already; nothing to lay out
	}
	rt.text, rt.whole = string(lay.Text), lay.Whole
	byStart := make(map[int]*node)
	ctree.walk(func(n *node) { byStart[n.start] = n })
	raw := pathIndex(rtree)
	units, prev := 0, 0
	for _, s := range lay.Segments {
		units += rt.measure(rt.text[prev:s.Start], false)
		prev = s.Start
		n := byStart[s.ValueStart]
		if n == nil {
			continue // cannot happen: both read the same canonical body
		}
		if !s.JSON {
			rt.segs = append(rt.segs, segment{path: n.path, text: n.text, start: units, raw: raw[n.path]})
			continue
		}
		pos, from := units, n.start
		visit := func(v *node) {
			if v.kind != kString && v.kind != kNumber {
				return
			}
			at := v.start
			if v.kind == kString {
				at++
			}
			pos += rt.measure(string(canon[from:at]), false)
			from = at
			rt.segs = append(rt.segs, segment{path: v.path, text: v.text, escaped: v.kind == kString, raw: raw[v.path], start: pos})
		}
		// In Messages mode the routing text's JSON has no cache_control
		// members: measure past them.
		skip := func(start, end int) {
			pos += rt.measure(string(canon[from:start]), false)
			from = end
		}
		n.walkRouted(mode == normalize.ModeMessages, canon, visit, skip)
	}
	rt.units = units + rt.measure(rt.text[prev:], false)
	return rt
}

// walkRouted is walk, except that with strip set it leaves out every
// member named cache_control and calls skip with the span of canonical
// bytes that leaving it out removes (the member and one comma).
func (n *node) walkRouted(strip bool, canon []byte, fn func(*node), skip func(start, end int)) {
	fn(n)
	for _, m := range n.members {
		if strip && m.name == "cache_control" {
			start, end := m.nameStart, m.value.end
			switch {
			case end < len(canon) && canon[end] == ',':
				end++
			case start > 0 && canon[start-1] == ',':
				start--
			}
			skip(start, end)
			continue
		}
		m.value.walkRouted(strip, canon, fn, skip)
	}
	for _, e := range n.elems {
		e.walkRouted(strip, canon, fn, skip)
	}
}

func isTextPart(n *node) bool {
	typ, text := n.get("type"), n.get("text")
	return typ != nil && typ.kind == kString && typ.text == "text" && text != nil && text.kind == kString
}
