package normalize

import (
	"fmt"
	"math"
)

// The Responses, Messages and pooling modes (docs/normalize.md). Their
// routing text is read off the parse tree only: Normalize reads it off the
// parse that wrote the canonical bytes, and RouteKey parses the canonical
// bytes it is given (routeKeyTree), so one piece of code lays it out.
//
//   - responses: "instructions" US text RS, "tools" US JSON RS, then the
//     input items but the final one (a lone item counts only when nothing
//     comes before it): a message item
//     (one with a string "role") as role US text RS, any other item as
//     US JSON RS. A string input is one user message.
//   - messages: "system" US text RS, "tools" US JSON RS, then the
//     messages but the final one (likewise), as role US text RS; every JSON in the
//     text is written without its cache_control members.
//   - pooling: for each of query, text_1, input, messages, documents,
//     text_2 present: name US, then a string's text RS, an array's
//     elements each followed by RS, any other value's JSON RS.

// modeTop holds the value nodes of the top-level members the modes read,
// -1 for a member the object lacks.
type modeTop struct {
	instructions, system, tools, input, messages, prevID int32
	// pooling holds the pooling members in poolingRouting order.
	pooling [len(poolingRouting)]int32
}

// poolingRouting lists a pooling body's routing members, in the order its
// routing text takes them: the query first, so that one query over many
// documents shares its beginning.
var poolingRouting = [...]string{"query", "text_1", "input", "messages", "documents", "text_2"}

func (p *parser) modeMembers(root *node) modeTop {
	t := modeTop{-1, -1, -1, -1, -1, -1, [len(poolingRouting)]int32{-1, -1, -1, -1, -1, -1}}
	for _, k := range p.members[root.m0 : root.m0+root.cnt] {
		name := string(p.key(k))
		switch name {
		case "instructions":
			t.instructions = k + 1
		case "system":
			t.system = k + 1
		case "tools":
			t.tools = k + 1
		case "input":
			t.input = k + 1
		case "messages":
			t.messages = k + 1
		case "previous_response_id":
			t.prevID = k + 1
		}
		for i, n := range poolingRouting {
			if name == n {
				t.pooling[i] = k + 1
			}
		}
	}
	return t
}

// routeKeyTree is RouteKey in the Responses, Messages and pooling modes:
// it parses the canonical body (so it also validates it) and reads the
// routing text off the tree.
func routeKeyTree(canonical []byte, opts KeyOptions) (RouteInfo, error) {
	p := getParser()
	defer putParser(p)
	p.decodeText = true
	if err := p.parse(canonical, Options{MaxBodyBytes: len(canonical) + 1, MaxStringBytes: len(canonical) + 1}.withDefaults()); err != nil {
		return RouteInfo{}, err
	}
	if err := p.checkMode(opts.Mode); err != nil {
		return RouteInfo{}, err
	}
	ri, _, err := p.routeInfo(opts)
	return ri, err
}

// schemaErr reports a body that does not fit its mode at node v.
func (p *parser) schemaErr(v int32, format string, args ...any) error {
	return newErr(p.valueStart(v), CodeSchema, ErrSchema, format, args...)
}

// is reports whether node v is of one of the kinds.
func (p *parser) is(v int32, kinds ...kind) bool {
	for _, k := range kinds {
		if p.nodes[v].kind == k {
			return true
		}
	}
	return false
}

// member returns the value node of object obj's member name, or -1.
func (p *parser) member(obj int32, name string) int32 {
	n := &p.nodes[obj]
	for _, k := range p.members[n.m0 : n.m0+n.cnt] {
		if string(p.key(k)) == name {
			return k + 1
		}
	}
	return -1
}

// checkMode reports the first place where the parsed body does not fit a
// Responses, Messages or pooling request; nil in the other modes.
func (p *parser) checkMode(mode Mode) error {
	if mode < ModeResponses {
		return nil
	}
	root := &p.nodes[0]
	if root.kind != kObject {
		return newErr(int(root.start), CodeSchema, ErrSchema, "a %s request must be a JSON object", mode)
	}
	t := p.modeMembers(root)
	switch mode {
	case ModeResponses:
		return p.checkResponses(t)
	case ModeMessages:
		return p.checkMessages(t)
	}
	for _, v := range t.pooling {
		if v >= 0 {
			return nil
		}
	}
	return newErr(0, CodeSchema, ErrSchema, "a pooling request needs query, text_1, input, messages, documents or text_2")
}

func (p *parser) checkResponses(t modeTop) error {
	switch {
	case t.instructions >= 0 && !p.is(t.instructions, kString, kNull):
		return p.schemaErr(t.instructions, "instructions: expected a string or null")
	case t.prevID >= 0 && !p.is(t.prevID, kString, kNull):
		return p.schemaErr(t.prevID, "previous_response_id: expected a string or null")
	case t.tools >= 0 && !p.is(t.tools, kArray, kNull):
		return p.schemaErr(t.tools, "tools: expected an array or null")
	case t.input < 0:
		return newErr(0, CodeSchema, ErrSchema, "a responses request needs an input")
	case p.is(t.input, kString):
		return nil
	case !p.is(t.input, kArray):
		return p.schemaErr(t.input, "input: expected a string or an array")
	}
	i := 0
	for e := t.input + 1; e < p.nodes[t.input].next; e, i = p.nodes[e].next, i+1 {
		if !p.is(e, kObject) {
			return p.schemaErr(e, "input[%d]: expected an object", i)
		}
		if role := p.member(e, "role"); role >= 0 {
			if !p.is(role, kString) {
				return p.schemaErr(role, "input[%d].role: expected a string", i)
			}
			if err := p.checkContent(e, fmt.Sprintf("input[%d]", i), false); err != nil {
				return err
			}
			continue
		}
		typ := p.member(e, "type")
		if typ < 0 {
			return p.schemaErr(e, "input[%d]: an item needs a role or a type", i)
		}
		if !p.is(typ, kString) {
			return p.schemaErr(typ, "input[%d].type: expected a string", i)
		}
	}
	return nil
}

// checkContent checks the content of message node m, whose path is at:
// absent (unless required), a string, or an array of objects.
func (p *parser) checkContent(m int32, at string, required bool) error {
	c := p.member(m, "content")
	switch {
	case c < 0 && required:
		return p.schemaErr(m, "%s: a message needs content", at)
	case c < 0 || p.is(c, kString):
		return nil
	case !p.is(c, kArray):
		return p.schemaErr(c, "%s.content: expected a string or an array", at)
	}
	return p.checkBlocks(c, at+".content")
}

// checkBlocks checks that every element of array node arr is an object.
func (p *parser) checkBlocks(arr int32, at string) error {
	j := 0
	for e := arr + 1; e < p.nodes[arr].next; e, j = p.nodes[e].next, j+1 {
		if !p.is(e, kObject) {
			return p.schemaErr(e, "%s[%d]: expected an object", at, j)
		}
	}
	return nil
}

func (p *parser) checkMessages(t modeTop) error {
	switch {
	case t.system >= 0 && p.is(t.system, kArray):
		if err := p.checkBlocks(t.system, "system"); err != nil {
			return err
		}
	case t.system >= 0 && !p.is(t.system, kString, kNull):
		return p.schemaErr(t.system, "system: expected a string, an array or null")
	}
	switch {
	case t.tools >= 0 && !p.is(t.tools, kArray, kNull):
		return p.schemaErr(t.tools, "tools: expected an array or null")
	case t.messages < 0:
		return newErr(0, CodeSchema, ErrSchema, "a messages request needs a messages array")
	case !p.is(t.messages, kArray):
		return p.schemaErr(t.messages, "messages: expected an array")
	}
	i := 0
	for e := t.messages + 1; e < p.nodes[t.messages].next; e, i = p.nodes[e].next, i+1 {
		at := fmt.Sprintf("messages[%d]", i)
		if !p.is(e, kObject) {
			return p.schemaErr(e, "%s: expected an object", at)
		}
		role := p.member(e, "role")
		if role < 0 {
			return p.schemaErr(e, "%s: a message needs a role", at)
		}
		if !p.is(role, kString) {
			return p.schemaErr(role, "%s.role: expected a string", at)
		}
		if err := p.checkContent(e, at, true); err != nil {
			return err
		}
	}
	return nil
}

// appendModeText appends the routing text of a Responses, Messages or
// pooling body, which starts at tstart in f, as appendRoutingRecords does
// for chat: the head records (instructions or system, tools), hashed on
// the chain the frame's head seeds, then the items, each hashed as a
// record on the mixed chain, all of them when hashing blocks.
func (p *parser) appendModeText(f []byte, tstart int, mode Mode, budget int, bh *blockHasher) ([]byte, bool) {
	t := p.modeMembers(&p.nodes[0])
	if mode == ModePooling {
		if bh != nil {
			budget = math.MaxInt
			bh.mix, bh.seed, bh.chain = true, bh.chain, 0
		}
		f = p.appendPoolingText(f, t, budget)
		if bh != nil {
			bh.record(f[tstart:])
		}
		return f, true
	}
	head, headName, items := t.instructions, "instructions", t.input
	if mode == ModeMessages {
		head, headName, items = t.system, "system", t.messages
	}
	if head >= 0 && !p.is(head, kNull) {
		f = append(f, headName...)
		f = append(f, unitSep)
		f = p.appendModeContent(f, head, mode)
		f = append(f, recordSep)
	}
	if t.tools >= 0 && !p.is(t.tools, kNull) {
		f = append(f, "tools"...)
		f = append(f, unitSep)
		f = p.routingJSON(f, t.tools, mode)
		f = append(f, recordSep)
	}
	if bh != nil {
		if len(f) > tstart {
			bh.record(f[tstart:])
		}
		bh.mix, bh.seed, bh.chain = true, bh.chain, 0
	}
	// The final item is the new question: it is left out whenever anything
	// comes before it (the head records or earlier items), so a shared
	// context keys alike; a lone item with nothing before it counts.
	lead := len(f) > tstart
	if p.is(items, kString) {
		// A string input is one user message.
		start := len(f)
		f = append(f, "user"...)
		f = append(f, unitSep)
		f = p.appendTextRec(f, items)
		f = append(f, recordSep)
		if bh != nil {
			bh.record(f[start:])
		}
		if lead {
			return f[:start], false
		}
		return f, true
	}
	return p.appendItemRecords(f, items, mode, budget, bh, lead)
}

// appendItemRecords appends the records of the items of array node arr, as
// appendChatText does for chat messages: every item but the final one, up
// to budget bytes past the end of dst. A lone item counts only when lead is
// false (no record comes before it). With bh set every record is hashed,
// the final one and those past the budget too. It reports whether the text
// holds every item (a lone one with nothing before it).
func (p *parser) appendItemRecords(dst []byte, arr int32, mode Mode, budget int, bh *blockHasher, lead bool) ([]byte, bool) {
	end := p.nodes[arr].next
	count, full := 0, false
	base := len(dst)
	for m := arr + 1; m < end; m = p.nodes[m].next {
		count++
		last := p.nodes[m].next >= end
		start := len(dst)
		if !full || bh != nil {
			dst = p.appendItem(dst, m, mode)
		}
		if bh != nil {
			bh.record(dst[start:])
			if full {
				dst = dst[:start]
			}
		}
		if last && (count > 1 || lead) && !full {
			dst = dst[:start]
		}
		if len(dst)-base > budget {
			full = true
		}
	}
	return dst, count == 1 && !lead
}

// appendItem appends the record of item (or message) m: role US text RS
// when it is an object with a string role, else US JSON RS.
func (p *parser) appendItem(dst []byte, m int32, mode Mode) []byte {
	role := int32(-1)
	if p.is(m, kObject) {
		role = p.member(m, "role")
	}
	if role < 0 || !p.is(role, kString) {
		dst = append(dst, unitSep)
		dst = p.routingJSON(dst, m, mode)
		return append(dst, recordSep)
	}
	dst = p.appendText(dst, role)
	dst = append(dst, unitSep)
	if c := p.member(m, "content"); c >= 0 {
		dst = p.appendModeContent(dst, c, mode)
	}
	return append(dst, recordSep)
}

// appendModeContent appends a message's text as chat's appendContent does:
// a string as is; for an array of parts, text parts by their text and
// other parts by their JSON, joined by '\n'; nothing for null; any other
// value as JSON. A text part is an object whose type is "text" (in
// Responses mode also "input_text" or "output_text") and whose text is a
// string.
func (p *parser) appendModeContent(dst []byte, c int32, mode Mode) []byte {
	n := &p.nodes[c]
	switch n.kind {
	case kString:
		return p.appendTextRec(dst, c)
	case kNull:
		return dst
	case kArray:
	default:
		return p.routingJSON(dst, c, mode)
	}
	for e := c + 1; e < n.next; e = p.nodes[e].next {
		if e > c+1 {
			dst = append(dst, '\n')
		}
		switch p.nodes[e].kind {
		case kString:
			dst = p.appendTextRec(dst, e)
		case kObject:
			if t := p.modeTextPart(e, mode); t >= 0 {
				dst = p.appendTextRec(dst, t)
			} else {
				dst = p.routingJSON(dst, e, mode)
			}
		default:
			dst = p.routingJSON(dst, e, mode)
		}
	}
	return dst
}

// modeTextPart returns the text node of a text part, or -1.
func (p *parser) modeTextPart(part int32, mode Mode) int32 {
	typ, text := p.member(part, "type"), p.member(part, "text")
	if typ < 0 || text < 0 || !p.is(typ, kString) || !p.is(text, kString) {
		return -1
	}
	if p.textEquals(typ, "text") || (mode == ModeResponses && (p.textEquals(typ, "input_text") || p.textEquals(typ, "output_text"))) {
		return text
	}
	return -1
}

// appendPoolingText appends the pooling routing text, stopping past budget
// bytes.
func (p *parser) appendPoolingText(dst []byte, t modeTop, budget int) []byte {
	base := len(dst)
	for i, v := range t.pooling {
		if v < 0 || len(dst)-base > budget {
			continue
		}
		dst = append(dst, poolingRouting[i]...)
		dst = append(dst, unitSep)
		if !p.is(v, kArray) {
			dst = p.appendElement(dst, v)
			continue
		}
		for e := v + 1; e < p.nodes[v].next && len(dst)-base <= budget; e = p.nodes[e].next {
			dst = p.appendElement(dst, e)
		}
	}
	return dst
}

// appendElement appends a string's text, or any other value's JSON, and RS.
func (p *parser) appendElement(dst []byte, v int32) []byte {
	if p.is(v, kString) {
		dst = p.appendTextRec(dst, v)
	} else {
		dst = p.emitRec(dst, v)
	}
	return append(dst, recordSep)
}

// routingJSON appends the canonical JSON of node v as the routing text
// holds it: in Messages mode without cache_control members, at any depth.
func (p *parser) routingJSON(dst []byte, v int32, mode Mode) []byte {
	if mode != ModeMessages {
		return p.emitRec(dst, v)
	}
	start := len(dst)
	dst = p.emitStripped(dst, v)
	if p.rec != nil {
		vs := p.valueStart(v)
		p.record(start, len(dst), vs, vs+len(p.emit(nil, v)), true)
	}
	return dst
}

// emitStripped is emit leaving out every member named cache_control.
func (p *parser) emitStripped(dst []byte, i int32) []byte {
	n := &p.nodes[i]
	switch n.kind {
	case kObject:
		dst = append(dst, '{')
		first := true
		for _, k := range p.members[n.m0 : n.m0+n.cnt] {
			if string(p.key(k)) == messagesVolatile {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = p.emitString(dst, k)
			dst = append(dst, ':')
			dst = p.emitStripped(dst, k+1)
		}
		return append(dst, '}')
	case kArray:
		dst = append(dst, '[')
		for c := i + 1; c < n.next; c = p.nodes[c].next {
			if c > i+1 {
				dst = append(dst, ',')
			}
			dst = p.emitStripped(dst, c)
		}
		return append(dst, ']')
	}
	return p.emit(dst, i)
}
