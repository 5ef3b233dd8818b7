package normalize

import "math"

// Routing information from the parse. Normalize has the whole document as
// a tree of nodes once it has validated it; reading the routing text off
// those nodes saves the second scan (and unescape) of the canonical bytes
// that RouteKey does. The records are the same bytes RouteKey writes (see
// docs/normalize.md): strings unescaped, every other value in its
// canonical JSON, which p.emit writes exactly as it appears in the
// canonical body below the top level.

// routeInfo derives the RouteInfo of a chat or completion body from the
// parse that canonical has just emitted. handled is false when RouteKey's
// scan of the canonical bytes must decide instead: native mode, whose
// routing text is the canonical body itself, and bodies that the mode
// rejects, so that the error stays RouteKey's, offset included.
func (p *parser) routeInfo(kopts KeyOptions) (ri RouteInfo, handled bool, err error) {
	mode := kopts.Mode
	if mode != ModeChat && mode != ModeCompletion {
		return RouteInfo{}, false, nil
	}
	n, err := checkKeyOptions(kopts)
	if err != nil {
		return RouteInfo{}, true, err
	}
	root := &p.nodes[0]
	if root.kind != kObject {
		return RouteInfo{}, false, nil
	}
	top := p.routingMembers(root)
	model, tools, pk, msgs, prompt := top.model, top.tools, top.cacheKey, top.messages, top.prompt
	switch mode {
	case ModeChat:
		if msgs < 0 || p.nodes[msgs].kind != kArray {
			return RouteInfo{}, false, nil
		}
	case ModeCompletion:
		if prompt < 0 || (p.nodes[prompt].kind != kString && p.nodes[prompt].kind != kArray) {
			return RouteInfo{}, false, nil
		}
	}
	ks := keyPool.Get().(*keyScratch)
	defer keyPool.Put(ks)
	var bh *blockHasher
	if kopts.Blocks {
		bh = &ks.bh
		bh.reset()
	}
	// Text past 8N characters cannot change any key; 4 bytes per character
	// bounds how much to collect.
	budget := 4*spillCap(n) + 4
	chatText, promptText := ks.chat[:0], ks.prompt[:0]
	if mode == ModeChat {
		chatText = p.appendChatText(chatText, msgs, budget, bh)
	} else {
		if bh != nil {
			budget = math.MaxInt // the whole prompt, for its blocks
		}
		promptText = p.appendPromptText(promptText, prompt, budget)
	}
	ks.chat, ks.prompt = chatText, promptText

	names := ks.names[:0]
	if kopts.Group == "" && pk >= 0 && p.nodes[pk].kind == kString {
		names = p.appendText(names, pk)
	}
	gEnd := len(names)
	if model >= 0 && p.nodes[model].kind == kString {
		names = p.appendText(names, model)
	}
	mEnd := len(names)
	var toolsJSON []byte
	if mode == ModeChat && tools >= 0 {
		names = p.emit(names, tools)
		toolsJSON = names[mEnd:]
	}
	ks.names = names
	ri, err = ks.finish(kopts, n, mode, names[:gEnd], names[gEnd:mEnd], toolsJSON, chatText, promptText, nil, bh)
	return ri, true, err
}

// topRouting holds the value nodes of the top-level members the routing
// layout reads, -1 for a member the object lacks.
type topRouting struct{ model, tools, cacheKey, messages, prompt int32 }

// routingMembers finds them among root's members (root is an object).
func (p *parser) routingMembers(root *node) topRouting {
	t := topRouting{-1, -1, -1, -1, -1}
	for _, k := range p.members[root.m0 : root.m0+root.cnt] {
		switch string(p.key(k)) {
		case "model":
			t.model = k + 1
		case "tools":
			t.tools = k + 1
		case "prompt_cache_key":
			t.cacheKey = k + 1
		case "messages":
			t.messages = k + 1
		case "prompt":
			t.prompt = k + 1
		}
	}
	return t
}

// appendText appends the unescaped text of string node i.
func (p *parser) appendText(dst []byte, i int32) []byte {
	n := &p.nodes[i]
	s := p.src[n.start:n.end]
	switch {
	case !n.esc:
		return append(dst, s...)
	case n.decoded():
		return append(dst, p.keybuf[n.m0:n.m0+n.cnt]...)
	}
	return appendUnescaped(dst, s)
}

// textEquals reports whether string node i unescapes to want.
func (p *parser) textEquals(i int32, want string) bool {
	n := &p.nodes[i]
	s := p.src[n.start:n.end]
	if !n.esc {
		return string(s) == want
	}
	// An escape is at most six bytes per byte of want.
	if len(s) > 6*len(want) {
		return false
	}
	var buf [64]byte
	return string(appendUnescaped(buf[:0], s)) == want
}

// appendChatText appends the chat routing records of the messages array at
// node arr: every message but the final one (a lone message counts), up to
// budget bytes. With bh set, every message's record, the final one and
// those past the budget too, is hashed into blocks.
func (p *parser) appendChatText(dst []byte, arr int32, budget int, bh *blockHasher) []byte {
	end := p.nodes[arr].next
	count, full := 0, false
	for m := arr + 1; m < end; m = p.nodes[m].next {
		count++
		last := p.nodes[m].next >= end
		start := len(dst)
		if !full || bh != nil {
			dst = p.appendMessage(dst, m)
		}
		if bh != nil {
			bh.record(dst[start:])
			if full {
				dst = dst[:start]
			}
		}
		if last && count > 1 && !full {
			dst = dst[:start]
		}
		if len(dst) > budget {
			full = true
		}
	}
	return dst
}

// appendMessage appends the record "role US text RS" of message node m.
func (p *parser) appendMessage(dst []byte, m int32) []byte {
	n := &p.nodes[m]
	if n.kind != kObject {
		return append(dst, unitSep, recordSep)
	}
	role, content := int32(-1), int32(-1)
	for _, k := range p.members[n.m0 : n.m0+n.cnt] {
		switch string(p.key(k)) {
		case "role":
			if p.nodes[k+1].kind == kString {
				role = k + 1
			}
		case "content":
			content = k + 1
		}
	}
	if role >= 0 {
		dst = p.appendText(dst, role)
	}
	dst = append(dst, unitSep)
	if content >= 0 {
		dst = p.appendContent(dst, content)
	}
	return append(dst, recordSep)
}

// appendContent appends a message's text: a string as is; for an array of
// parts, text parts by their text and other parts by their canonical JSON,
// joined by '\n'; nothing for null; any other value as canonical JSON.
func (p *parser) appendContent(dst []byte, c int32) []byte {
	n := &p.nodes[c]
	switch n.kind {
	case kString:
		return p.appendTextRec(dst, c)
	case kNull:
		return dst
	case kArray:
	default:
		return p.emitRec(dst, c)
	}
	for e := c + 1; e < n.next; e = p.nodes[e].next {
		if e > c+1 {
			dst = append(dst, '\n')
		}
		switch p.nodes[e].kind {
		case kString:
			dst = p.appendTextRec(dst, e)
		case kObject:
			if t := p.textPart(e); t >= 0 {
				dst = p.appendTextRec(dst, t)
			} else {
				dst = p.emitRec(dst, e)
			}
		default:
			dst = p.emitRec(dst, e)
		}
	}
	return dst
}

// textPart returns the text node of a {"type": "text", "text": "..."}
// part, or -1 when part is any other object.
func (p *parser) textPart(part int32) int32 {
	n := &p.nodes[part]
	isText, text := false, int32(-1)
	for _, k := range p.members[n.m0 : n.m0+n.cnt] {
		switch string(p.key(k)) {
		case "type":
			isText = p.nodes[k+1].kind == kString && p.textEquals(k+1, "text")
		case "text":
			if p.nodes[k+1].kind == kString {
				text = k + 1
			}
		}
	}
	if !isText {
		return -1
	}
	return text
}

// appendPromptText appends the completion routing text of prompt node v, a
// string or an array: a string as is; an array as its elements (strings
// unescaped, anything else as canonical JSON), each followed by RS, until
// the text is over budget.
func (p *parser) appendPromptText(dst []byte, v int32, budget int) []byte {
	n := &p.nodes[v]
	if n.kind == kString {
		return p.appendTextRec(dst, v)
	}
	for e := v + 1; e < n.next; e = p.nodes[e].next {
		if len(dst) > budget {
			break
		}
		if p.nodes[e].kind == kString {
			dst = p.appendTextRec(dst, e)
		} else {
			dst = p.emitRec(dst, e)
		}
		dst = append(dst, recordSep)
	}
	return dst
}
