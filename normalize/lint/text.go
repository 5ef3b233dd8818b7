package lint

import (
	"strings"
	"unicode/utf8"

	"github.com/prefixgate/prefixgate/normalize"
)

// Separators inside the routing text, as package normalize writes them.
const (
	unitSep   = "\x1f"
	recordSep = "\x1e"
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

// routingText is the routing text of one request, laid out the way package
// normalize builds it, with the JSON value each part came from.
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

type textBuilder struct {
	rt    *routingText
	sb    strings.Builder
	units int
	raw   map[string]*node
	canon []byte
	cmap  map[string]*node
}

func (tb *textBuilder) plain(s string) {
	tb.sb.WriteString(s)
	tb.units += tb.rt.measure(s, false)
}

// value adds a string value as text, recording a segment.
func (tb *textBuilder) value(n *node) {
	tb.rt.segs = append(tb.rt.segs, segment{path: n.path, text: n.text, start: tb.units, raw: tb.raw[n.path]})
	tb.plain(n.text)
}

// canonical adds the canonical JSON of n (a node of the canonical tree),
// recording a segment for every string and number inside it. Positions are
// measured from the previous value on, not from the start of n each time:
// that would be quadratic in a tools array of many strings.
func (tb *textBuilder) canonical(n *node) {
	pos, prev := tb.units, n.start
	src := tb.canon[n.start:n.end]
	n.walk(func(v *node) {
		if v.kind != kString && v.kind != kNumber {
			return
		}
		at := v.start
		if v.kind == kString {
			at++
		}
		pos += tb.rt.measure(string(tb.canon[prev:at]), false)
		prev = at
		tb.rt.segs = append(tb.rt.segs, segment{
			path: v.path, text: v.text, escaped: v.kind == kString, raw: tb.raw[v.path], start: pos,
		})
	})
	tb.plain(string(src))
}

// buildRoutingText lays out the routing text of a canonical body in mode
// (never ModeAuto), mirroring package normalize's key.
func buildRoutingText(mode normalize.Mode, canon []byte, ctree, rtree *node) *routingText {
	rt := &routingText{mode: mode}
	tb := &textBuilder{rt: rt, raw: pathIndex(rtree), canon: canon}
	switch mode {
	case normalize.ModeChat:
		if tools := ctree.get("tools"); tools != nil {
			tb.plain("tools" + unitSep)
			tb.canonical(tools)
			tb.plain(recordSep)
		}
		msgs := ctree.get("messages")
		if msgs == nil {
			break
		}
		count := len(msgs.elems)
		rt.whole = count == 1
		for i, m := range msgs.elems {
			if i == count-1 && count > 1 {
				break
			}
			if role := m.get("role"); role != nil && role.kind == kString {
				tb.plain(role.text)
			}
			tb.plain(unitSep)
			if c := m.get("content"); c != nil {
				tb.content(c)
			}
			tb.plain(recordSep)
		}
	case normalize.ModeCompletion:
		rt.whole = true
		p := ctree.get("prompt")
		switch {
		case p == nil:
		case p.kind == kString:
			tb.value(p)
		case p.kind == kArray:
			for _, e := range p.elems {
				if e.kind == kString {
					tb.value(e)
				} else {
					tb.canonical(e)
				}
				tb.plain(recordSep)
			}
		}
	case normalize.ModeNative, normalize.ModeAuto:
		if ctree.kind == kObject {
			// The canonical object with its routing members only.
			names := make([]string, len(ctree.members))
			for i, m := range ctree.members {
				names[i] = m.name
			}
			keep := normalize.NativeRoutingMember(names)
			tb.plain("{")
			first := true
			for _, m := range ctree.members {
				if !keep(m.name) {
					continue
				}
				if !first {
					tb.plain(",")
				}
				first = false
				tb.plain(string(canon[m.nameStart:m.value.start]))
				tb.canonical(m.value)
			}
			tb.plain("}")
			break
		}
		ctree.walk(func(v *node) {
			if v.kind != kString && v.kind != kNumber {
				return
			}
			at := v.start
			if v.kind == kString {
				at++
			}
			rt.segs = append(rt.segs, segment{path: v.path, text: v.text, start: at, escaped: v.kind == kString, raw: tb.raw[v.path]})
		})
		tb.sb.Write(canon)
		tb.units = len(canon)
	}
	rt.text = tb.sb.String()
	rt.units = tb.units
	return rt
}

// content adds a message's content: a string as is, an array of parts as
// text parts by their text and other parts as canonical JSON, joined by a
// newline; null adds nothing.
func (tb *textBuilder) content(c *node) {
	switch c.kind {
	case kString:
		tb.value(c)
	case kLiteral:
		if c.text != "null" {
			tb.canonical(c)
		}
	case kArray:
		for i, part := range c.elems {
			if i > 0 {
				tb.plain("\n")
			}
			switch {
			case part.kind == kString:
				tb.value(part)
			case part.kind == kObject && isTextPart(part):
				tb.value(part.get("text"))
			default:
				tb.canonical(part)
			}
		}
	default:
		tb.canonical(c)
	}
}

func isTextPart(n *node) bool {
	typ, text := n.get("type"), n.get("text")
	return typ != nil && typ.kind == kString && typ.text == "text" && text != nil && text.kind == kString
}
