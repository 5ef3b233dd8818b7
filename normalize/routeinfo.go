package normalize

import (
	"encoding/binary"
	"math"

	"github.com/zeebo/xxh3"
)

// Routing information from the parse. Normalize has the whole document as
// a tree of nodes once it has validated it; reading the routing text off
// those nodes saves the second scan (and unescape) of the canonical bytes
// that RouteKey does. The records are the same bytes RouteKey writes (see
// docs/normalize.md): strings unescaped, every other value in its
// canonical JSON, which p.emit writes exactly as it appears in the
// canonical body below the top level.

// routeInfo derives the RouteInfo of a chat, completion, Responses,
// Messages or pooling body from the
// parse that canonical has just emitted. handled is false when RouteKey's
// scan of the canonical bytes must decide instead: native mode, whose
// routing text is the canonical body itself, and bodies that the mode
// rejects, so that the error stays RouteKey's, offset included.
//
// The parse knows the group, the model and the tools before the messages,
// which canonical order puts after them, so the key's frame is written in
// order: its head, then the routing text straight after it, with no copy
// of the text from a buffer of its own, and the block hasher mixes each
// message block with the seed as it hashes it.
func (p *parser) routeInfo(kopts KeyOptions) (ri RouteInfo, handled bool, err error) {
	mode := kopts.Mode
	if mode == ModeNative || mode == ModeAuto {
		return RouteInfo{}, false, nil
	}
	n, err := checkKeyOptions(kopts)
	if err != nil {
		return RouteInfo{}, true, err
	}
	top, ok := p.routingTop(mode)
	if !ok {
		return RouteInfo{}, false, nil
	}
	ks := keyPool.Get().(*keyScratch)
	defer keyPool.Put(ks)
	f, ri, tstart := p.appendFrameHead(ks.frame[:0], mode, kopts.Group, top)
	var bh *blockHasher
	if kopts.Blocks {
		bh = &ks.bh
		bh.reset()
		// Without a character from U+0080 up in the document, every
		// record is ASCII: no block's characters need counting.
		bh.ascii = !p.nonASCII
		bh.chain = xxh3.Hash(f[:tstart-4])
	}
	// Text past 8N characters cannot change any key; 4 bytes per character
	// bounds how much to collect.
	f = p.appendRoutingRecords(f, tstart, mode, top, 4*spillCap(n)+4, bh)
	ks.frame = f

	var cur charCursor
	// An ASCII text's characters are its bytes (see parser.nonASCII).
	cur.bytes = !p.nonASCII
	if bh != nil && !cur.bytes {
		// The block hasher counted the characters of the records as it
		// hashed them; the cut starts from its counts.
		cur.marks = bh.marks
	}
	ri.keys(f, tstart, n, &cur)
	if bh != nil {
		// A fresh slice, never nil (as prefixBlocks gives): the hasher's
		// is pooled scratch.
		ri.Blocks = append(make([]uint64, 0, len(bh.blocks)), bh.blocks...)
		ri.PromptTokens = (bh.chars + 3) / 4
		ri.chatSeed, ri.chatChain = bh.seed, bh.chain
		ri.chatBlocks = mode == ModeChat || mode == ModeResponses || mode == ModeMessages
	}
	return ri, true, nil
}

// routingTop finds the top-level members the routing layout reads, and
// reports whether the body fits mode; when it does not, RouteKey decides.
func (p *parser) routingTop(mode Mode) (topRouting, bool) {
	root := &p.nodes[0]
	if root.kind != kObject {
		return topRouting{}, false
	}
	top := p.routingMembers(root)
	switch mode {
	case ModeChat:
		if top.messages < 0 || p.nodes[top.messages].kind != kArray {
			return top, false
		}
	case ModeCompletion:
		if top.prompt < 0 || (p.nodes[top.prompt].kind != kString && p.nodes[top.prompt].kind != kArray) {
			return top, false
		}
	default:
		if p.checkMode(mode) != nil {
			return top, false
		}
	}
	return top, true
}

// appendFrameHead appends the frame's head, as finish writes it: mode, then
// group and model, each after its length, and the length field of the
// routing text. It returns the RouteInfo with its mode, group and model,
// and where the routing text starts.
func (p *parser) appendFrameHead(f []byte, mode Mode, group string, top topRouting) ([]byte, RouteInfo, int) {
	f = append(f, byte(mode), 0, 0, 0, 0)
	gstart := len(f)
	if group != "" {
		f = append(f, group...)
	} else if top.cacheKey >= 0 && p.nodes[top.cacheKey].kind == kString {
		f = p.appendText(f, top.cacheKey)
	}
	binary.LittleEndian.PutUint32(f[gstart-4:], uint32(len(f)-gstart))
	f = append(f, 0, 0, 0, 0)
	mstart := len(f)
	if top.model >= 0 && p.nodes[top.model].kind == kString {
		f = p.appendText(f, top.model)
	}
	binary.LittleEndian.PutUint32(f[mstart-4:], uint32(len(f)-mstart))
	f = append(f, 0, 0, 0, 0)
	tstart := len(f)
	return f, RouteInfo{Mode: mode, Group: string(f[gstart : mstart-4]), Model: string(f[mstart : tstart-4])}, tstart
}

// appendRoutingRecords appends the routing text, which starts at tstart in
// f: in chat mode the tools and the messages, in completion mode the
// prompt, all of it when hashing blocks.
func (p *parser) appendRoutingRecords(f []byte, tstart int, mode Mode, top topRouting, budget int, bh *blockHasher) []byte {
	if mode >= ModeResponses {
		f, _ = p.appendModeText(f, tstart, mode, budget, bh)
		return f
	}
	if mode != ModeChat {
		if bh != nil {
			budget = math.MaxInt // the whole prompt, for its blocks
			bh.mix, bh.seed, bh.chain = true, bh.chain, 0
		}
		f = p.appendPromptText(f, top.prompt, budget)
		if bh != nil {
			bh.record(f[tstart:])
		}
		return f
	}
	if top.tools >= 0 {
		f = append(f, "tools"...)
		f = append(f, unitSep)
		f = p.emit(f, top.tools)
		f = append(f, recordSep)
		if bh != nil {
			bh.record(f[tstart:])
		}
	}
	if bh != nil {
		// The tools blocks chain on from the head's hash; the message
		// chain starts at 0 and each block is mixed with where the
		// tools left the chain (prefixBlocks).
		bh.mix, bh.seed, bh.chain = true, bh.chain, 0
	}
	return p.appendChatText(f, top.messages, budget, bh)
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
// budget bytes past the end of dst. With bh set, every message's record,
// the final one and those past the budget too, is hashed into blocks.
func (p *parser) appendChatText(dst []byte, arr int32, budget int, bh *blockHasher) []byte {
	end := p.nodes[arr].next
	count, full := 0, false
	base := len(dst)
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
		if len(dst)-base > budget {
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
// the text past the end of dst is over budget.
func (p *parser) appendPromptText(dst []byte, v int32, budget int) []byte {
	n := &p.nodes[v]
	if n.kind == kString {
		return p.appendTextRec(dst, v)
	}
	base := len(dst)
	for e := v + 1; e < n.next; e = p.nodes[e].next {
		if len(dst)-base > budget {
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
