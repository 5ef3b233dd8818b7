package normalize

import (
	"math"
	"slices"
)

// RoutingText is a request's whole routing text, laid out by the same code
// that keys it, with the place in the canonical body each part comes from:
// what a linter needs to say which JSON value sits where in the window. It
// is not cut to a window: in chat mode it holds the tools record and every
// message but the final one (a lone message counts), in Responses and
// Messages mode the instructions or system record, the tools record and
// every item or message but the final one (a lone one counts only with no
// record before it), in completion mode the whole
// prompt, in pooling mode every pooling member, in native mode the routing
// members.
type RoutingText struct {
	Text []byte
	// Segments are the runs of Text that hold one JSON value of the
	// canonical body, in order. Roles, separators and native member names
	// are layout and belong to no segment.
	Segments []Segment
	// Whole says that Text holds the whole prompt (a completion prompt or a
	// lone message with nothing before it in its mode's text): nothing is
	// held back from the key.
	Whole bool
}

// Segment is one JSON value's run of a routing text.
type Segment struct {
	// Start and End are the run's byte offsets in RoutingText.Text.
	Start, End int
	// ValueStart and ValueEnd are the value's byte offsets in the canonical
	// body; a string's include its quotes.
	ValueStart, ValueEnd int
	// JSON says the run holds the value's canonical JSON (tools, parts that
	// are not text, prompts that are not strings, native members); else it
	// holds a string's decoded text.
	JSON bool
}

// LayOutRoutingText returns the routing text of a canonical body (the
// output of Normalize) in mode; ModeAuto lays it out as native, as the
// linter keys undetected bodies. Bodies that do not fit the mode's schema
// give what they have (in the Responses, Messages and pooling modes: an
// empty text); RouteKey is the one to reject them.
func LayOutRoutingText(canonical []byte, mode Mode) (RoutingText, error) {
	p := getParser()
	defer putParser(p)
	p.decodeText = true
	if err := p.parse(canonical, Options{MaxBodyBytes: len(canonical)}.withDefaults()); err != nil {
		return RoutingText{}, err
	}
	var segs []Segment
	p.rec = &segs
	defer func() { p.rec = nil }()
	var text []byte
	var whole bool
	root := &p.nodes[0]
	switch mode {
	case ModeChat, ModeCompletion:
		if root.kind != kObject {
			break
		}
		top := p.routingMembers(root)
		tools, msgs, prompt := top.tools, top.messages, top.prompt
		if mode == ModeCompletion {
			if prompt >= 0 && (p.nodes[prompt].kind == kString || p.nodes[prompt].kind == kArray) {
				text, whole = p.appendPromptText(text, prompt, math.MaxInt), true
			}
			break
		}
		if tools >= 0 {
			text = append(text, "tools"...)
			text = append(text, unitSep)
			text = p.emitRec(text, tools)
			text = append(text, recordSep)
		}
		if msgs >= 0 && p.nodes[msgs].kind == kArray {
			count := 0
			for m := msgs + 1; m < p.nodes[msgs].next; m = p.nodes[m].next {
				count++
			}
			text, whole = p.appendChatText(text, msgs, math.MaxInt, nil), count == 1
			// The final message's record was written and taken back:
			// so are its segments.
			segs = slices.DeleteFunc(segs, func(s Segment) bool { return s.Start >= len(text) })
		}
	case ModeResponses, ModeMessages, ModePooling:
		if p.checkMode(mode) != nil {
			break
		}
		text, whole = p.appendModeText(text, 0, mode, math.MaxInt, nil)
		segs = slices.DeleteFunc(segs, func(s Segment) bool { return s.Start >= len(text) })
	default:
		text = p.appendNativeRoutingText(text)
	}
	return RoutingText{Text: text, Segments: segs, Whole: whole}, nil
}

// appendNativeRoutingText appends the native routing text of the parsed
// canonical body (see appendNativeText, which keys it: the routing members
// in body order), each member's value a JSON segment.
func (p *parser) appendNativeRoutingText(dst []byte) []byte {
	root := &p.nodes[0]
	if root.kind != kObject {
		start := len(dst)
		dst = append(dst, p.src...)
		p.record(start, len(dst), 0, len(p.src), true)
		return dst
	}
	ms := slices.Clone(p.members[root.m0 : root.m0+root.cnt])
	// p.members is in JCS order; the canonical top level is in schema
	// order, which the key reads.
	slices.SortFunc(ms, func(a, b int32) int { return int(p.nodes[a].start) - int(p.nodes[b].start) })
	var has promptMembers
	name := func(k int32) []byte { return p.src[p.nodes[k].start:p.nodes[k].end] }
	for _, k := range ms {
		has.note(name(k))
	}
	keep := nativeKeep(has)
	dst = append(dst, '{')
	first := true
	for _, k := range ms {
		if !keep(name(k)) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, p.src[p.nodes[k].start-1:p.valueStart(k+1)]...)
		dst = p.emitRec(dst, k+1)
	}
	return append(dst, '}')
}

// valueStart is where node i begins in the source: a string at its quote.
func (p *parser) valueStart(i int32) int {
	if p.nodes[i].kind == kString {
		return int(p.nodes[i].start) - 1
	}
	return int(p.nodes[i].start)
}

// record notes a segment when LayOutRoutingText asked for them.
func (p *parser) record(start, end, vstart, vend int, json bool) {
	*p.rec = append(*p.rec, Segment{Start: start, End: end, ValueStart: vstart, ValueEnd: vend, JSON: json})
}

// appendTextRec is appendText noting the string's segment.
func (p *parser) appendTextRec(dst []byte, i int32) []byte {
	start := len(dst)
	dst = p.appendText(dst, i)
	if p.rec != nil {
		p.record(start, len(dst), p.valueStart(i), int(p.nodes[i].end)+1, false)
	}
	return dst
}

// emitRec is emit noting the value's JSON segment. The source is canonical
// when segments are asked for, so the value's span there is as long as
// what emit writes.
func (p *parser) emitRec(dst []byte, i int32) []byte {
	start := len(dst)
	dst = p.emit(dst, i)
	if p.rec != nil {
		vs := p.valueStart(i)
		p.record(start, len(dst), vs, vs+len(dst)-start, true)
	}
	return dst
}
