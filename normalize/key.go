package normalize

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// Prefix length bounds, in characters (bytes in native mode).
const (
	DefaultPrefixLength = 4096
	MinPrefixLength     = 1024
	MaxPrefixLength     = 65536
	// MaxGroupBytes bounds an explicit group id (printable ASCII).
	MaxGroupBytes = 64
	// spillWindows is the number of spill keys: windows 2N, 4N and 8N.
	spillWindows = 3
)

// Separators inside the routing text; see docs/normalize.md.
const (
	unitSep   = 0x1f // between a name and its text
	recordSep = 0x1e // after each record (tools, message, prompt element)
)

// KeyOptions controls the routing key.
type KeyOptions struct {
	// Mode is the routing mode; ModeAuto detects it from the body as
	// canonicalization does (docs/normalize.md, "Schema detection"), and
	// keys a body of no known schema as native.
	Mode Mode
	// Group is the explicit group id (≤ 64 printable ASCII); empty means the
	// body's prompt_cache_key, if any.
	Group string
	// PrefixLength is N, the routing window: characters (Unicode code
	// points) in chat and completion mode, bytes in native mode. 0 means
	// 4096; otherwise it must be within 1024..65536.
	PrefixLength int
	// Blocks asks for RouteInfo.Blocks and PromptTokens: the prefix blocks
	// of the whole prompt, for the router's prefix index. It makes the pass
	// read the whole prompt rather than stop past the longest window.
	Blocks bool
}

// BlockSize is the routing text bytes per prefix block (RouteInfo.Blocks).
const BlockSize = 64

// RouteInfo is the routing key of a request and what it was computed from.
type RouteInfo struct {
	// Key is xxh3-64 over group, model and the routing text cut to N.
	Key uint64
	// SpillKeys are the keys over windows 2N, 4N and 8N, present only while
	// the routing text is longer than the window before; a hot prefix can
	// spill to the ring positions of these longer windows.
	SpillKeys []uint64
	// Mode is the routing mode used (never ModeAuto).
	Mode Mode
	// Model is the model or LoRA adapter name ("" when absent).
	Model string
	// Group is the group id used ("" when none).
	Group string
	// RoutingTextLen is the length of the text under Key: characters in chat
	// and completion mode, bytes in native mode; at most N.
	RoutingTextLen int
	// Blocks are chained hashes of the whole prompt's routing text in blocks
	// of BlockSize bytes (KeyOptions.Blocks; nil otherwise): Blocks[i]
	// depends on the group, the model and every byte up to the end of block
	// i, so two requests share their first k blocks exactly when they share
	// that much prefix. In chat mode blocks are message-aligned: each
	// message record (role, text) is cut on its own and its trailing
	// partial block is hashed too, so a conversation's next turn, which
	// repeats the messages, repeats their blocks. See docs/normalize.md.
	Blocks []uint64
	// PromptTokens estimates the prompt's tokens: characters of the routing
	// text (all of it, tools and every message) divided by 4 (bytes in
	// native mode); set with Blocks.
	PromptTokens int
	// chatChain and chatSeed are the message chain after the last message
	// and the seed mixed into it (chat mode with Blocks), so AnswerBlocks
	// can go on where Blocks stopped.
	chatChain, chatSeed uint64
	chatBlocks          bool
}

// AnswerBlocks returns the blocks the next turn's prompt starts with when it
// carries an assistant message holding text (the generated answer) after
// this request's messages: Blocks followed by the blocks of that message's
// record, hashed as RouteKey would hash them in that next request. It
// returns nil unless ri came from a chat, Responses or Messages request
// keyed with KeyOptions.Blocks (in Responses mode the answer goes back as
// an assistant message item whose output_text parts hold it). text is the answer as the client will send it back
// (decoded characters, not JSON); it is hashed, not kept.
func (ri RouteInfo) AnswerBlocks(text []byte) []uint64 {
	if !ri.chatBlocks {
		return nil
	}
	rec := make([]byte, 0, len("assistant")+2+len(text))
	rec = append(rec, "assistant"...)
	rec = append(rec, unitSep)
	rec = append(rec, text...)
	rec = append(rec, recordSep)
	// The record's blocks go on the chain where the messages left it and
	// are mixed with their seed, appended to a copy of Blocks grown once
	// (capacity cut to the length, so ri.Blocks is never written): no
	// second buffer, and no zeroing of what the copy fills.
	n := len(ri.Blocks)
	h := blockHasher{chain: ri.chatChain, mix: true, seed: ri.chatSeed}
	h.blocks = slices.Grow(ri.Blocks[:n:n], (len(rec)+BlockSize-1)/BlockSize)
	h.record(rec)
	return h.blocks
}

// KeyHex returns the key as 16 lowercase hex digits.
func (ri RouteInfo) KeyHex() string { return FormatKey(ri.Key) }

// FormatKey prints a key as 16 lowercase hex digits.
func FormatKey(k uint64) string {
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[k&0xF]
		k >>= 4
	}
	return string(b[:])
}

type keyScratch struct {
	frame, chat, prompt, role, names []byte
	bh                               blockHasher
}

// blockHasher cuts records into BlockSize chunks and chains their hashes:
// chain = xxh3(chunk, seed = chain). The chain of the message records
// starts at 0 and is mixed with the seed (group, model, tools): on a scan
// of canonical bytes once those are known, since canonical order puts them
// after the messages (prefixBlocks); on a parse, which knows them first,
// as each block is hashed (mix).
type blockHasher struct {
	chain  uint64
	blocks []uint64
	chars  int
	// With marking on, marks holds each block's end: bytes and
	// characters hashed so far. The routing text's cut reads them rather
	// than counting the same characters again (charCursor).
	marking bool
	bytes   int
	marks   []charMark
	// ascii says the records hold no byte from 0x80 up, so a block's
	// characters are its bytes: nothing is counted, and no marks are
	// needed, since the cut can count bytes.
	ascii bool
	// With mix on, blocks holds each block's chain mixed with seed
	// (seedBlock), the value RouteInfo.Blocks holds, rather than the
	// chain itself.
	mix  bool
	seed uint64
}

// charMark is a place in the hashed records: bytes and characters before it.
type charMark struct{ end, chars int }

// reset starts the request's hasher over, marking block ends.
func (h *blockHasher) reset() {
	h.chain, h.blocks, h.chars = 0, h.blocks[:0], 0
	h.marking, h.bytes, h.marks = true, 0, h.marks[:0]
	h.ascii, h.mix, h.seed = false, false, 0
}

// record hashes one record, its last partial block included. It works on
// locals and stores them once: it runs for every 64 bytes of every
// prompt, and h lives in pooled scratch, so each store to a field would
// be a store to memory.
func (h *blockHasher) record(rec []byte) {
	chain, blocks, chars := h.chain, h.blocks, h.chars
	bytes, marks := h.bytes, h.marks
	marking := h.marking && !h.ascii
	for len(rec) > 0 {
		n := min(BlockSize, len(rec))
		if n == BlockSize {
			chain = hashBlock(rec, chain)
		} else {
			chain = xxh3.HashSeed(rec[:n], chain)
		}
		if h.mix {
			blocks = append(blocks, seedBlock(chain, h.seed))
		} else {
			blocks = append(blocks, chain)
		}
		chars += n
		if !h.ascii {
			chars -= continuationBytes(rec[:n])
		}
		if marking {
			bytes += n
			marks = append(marks, charMark{end: bytes, chars: chars})
		}
		rec = rec[n:]
	}
	h.chain, h.blocks, h.chars = chain, blocks, chars
	h.bytes, h.marks = bytes, marks
}

// continuationBytes counts the UTF-8 continuation bytes (10xxxxxx) of b,
// eight at a time: characters are the bytes that are not continuations.
func continuationBytes(b []byte) int {
	c := 0
	// Four words at a time, and no counting at all when they are ASCII:
	// prompts are mostly ASCII, and this runs over every byte of the
	// routing text.
	for len(b) >= 32 {
		v0, v1 := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		v2, v3 := binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])
		if (v0|v1|v2|v3)&msb != 0 {
			c += continuationsIn(v0) + continuationsIn(v1) + continuationsIn(v2) + continuationsIn(v3)
		}
		b = b[32:]
	}
	for len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		c += bits.OnesCount64(v &^ (v << 1) & msb)
		b = b[8:]
	}
	for _, x := range b {
		if x&0xC0 == 0x80 {
			c++
		}
	}
	return c
}

// continuationsIn counts the UTF-8 continuation bytes among the 8 bytes of v.
func continuationsIn(v uint64) int { return bits.OnesCount64(v &^ (v << 1) & msb) }

// seedBlock mixes a message block's chain value with the seed.
func seedBlock(c, seed uint64) uint64 {
	z := c ^ (seed * 0x9e3779b97f4a7c15)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

var keyPool = sync.Pool{New: func() any { return new(keyScratch) }}

// Normalize canonicalizes src into dst and computes the routing key of the
// canonical form. A KeyOptions mode of ModeAuto follows the schema that
// canonicalization used. Chat and completion keys are read off the same
// parse that writes the canonical bytes (routeinfo.go), with the result
// RouteKey gives for those bytes; native keys scan the canonical bytes.
func Normalize(dst, src []byte, opts Options, kopts KeyOptions) ([]byte, RouteInfo, error) {
	return NormalizeScoped(dst, src, opts, kopts, nil)
}

// Scope rewrites a request for its tenant inside Normalize's one pass. It
// gets the group the key would use (KeyOptions.Group, else the body's
// prompt_cache_key string, else "") and the body's cache_salt ("" when
// absent or null; a string's text; any other value's canonical JSON), and
// returns the group to key on (the KeyOptions.Group rules apply) and the
// cache_salt, valid UTF-8, that the canonical body carries in place of
// any it had.
type Scope func(group, cacheSalt string) (keyGroup, newSalt string)

// NormalizeScoped is Normalize with a scope (none when nil). With a scope
// the body must be a JSON object: the salt is one of its members.
func NormalizeScoped(dst, src []byte, opts Options, kopts KeyOptions, scope Scope) ([]byte, RouteInfo, error) {
	start := len(dst)
	p := getParser()
	defer putParser(p)
	p.decodeText = true
	mode, err := p.parseSchema(src, opts)
	if err != nil {
		return dst, RouteInfo{}, err
	}
	var salt []byte
	if scope != nil {
		if salt, kopts.Group, err = p.applyScope(scope, kopts.Group); err != nil {
			return dst, RouteInfo{}, err
		}
	}
	out := p.emitRoot(dst, mode, salt)
	if kopts.Mode == ModeAuto {
		kopts.Mode = mode
		if mode == ModeAuto {
			kopts.Mode = ModeNative
		}
	}
	ri, handled, err := p.routeInfo(kopts)
	if !handled {
		ri, err = RouteKey(out[start:], kopts)
	}
	if err != nil {
		return dst, RouteInfo{}, err
	}
	return out, ri, nil
}

// applyScope calls scope with the parsed body's group and cache_salt and
// returns the salt to write and the group to key on.
func (p *parser) applyScope(scope Scope, group string) ([]byte, string, error) {
	root := &p.nodes[0]
	if root.kind != kObject {
		return nil, "", newErr(int(root.start), CodeInvalidScope, ErrSchema, "a scoped request must be a JSON object")
	}
	var old []byte
	for _, k := range p.members[root.m0 : root.m0+root.cnt] {
		switch v := k + 1; string(p.key(k)) {
		case "prompt_cache_key":
			if group == "" && p.nodes[v].kind == kString {
				group = string(p.appendText(nil, v))
			}
		case cacheSalt:
			switch p.nodes[v].kind {
			case kNull:
			case kString:
				old = p.appendText(nil, v)
			default:
				old = p.emit(nil, v)
			}
		}
	}
	keyGroup, salt := scope(group, string(old))
	if !utf8.ValidString(salt) {
		return nil, "", &optionError{code: CodeInvalidScope, msg: "scope returned a cache_salt that is not valid UTF-8"}
	}
	return []byte(salt), keyGroup, nil
}

// checkKeyOptions validates the prefix length and the explicit group id
// and returns N.
func checkKeyOptions(opts KeyOptions) (int, error) {
	n := opts.PrefixLength
	if n == 0 {
		n = DefaultPrefixLength
	}
	if n < MinPrefixLength || n > MaxPrefixLength {
		return 0, &optionError{code: CodePrefixLength, msg: fmt.Sprintf("prefix length %d is outside %d..%d", n, MinPrefixLength, MaxPrefixLength)}
	}
	if err := CheckGroup(opts.Group); err != nil {
		return 0, err
	}
	return n, nil
}

// CheckGroup enforces the group id contract: at most MaxGroupBytes of
// printable ASCII. Its error's code is CodeInvalidGroup.
func CheckGroup(g string) error {
	if len(g) > MaxGroupBytes {
		return &optionError{code: CodeInvalidGroup, msg: fmt.Sprintf("group id of %d bytes is over %d", len(g), MaxGroupBytes)}
	}
	for i := 0; i < len(g); i++ {
		if c := g[i]; c < 0x20 || c > 0x7e {
			return &optionError{code: CodeInvalidGroup, msg: fmt.Sprintf("group id has a non-printable byte 0x%02x at %d", c, i)}
		}
	}
	return nil
}

// RouteKey computes the routing key of a canonical body, as returned by
// AppendCanonical. It reads the body in one pass and checks its structure,
// but does not validate it: the key of bytes that are not canonical may
// differ from the key of their canonical form. In the Responses, Messages
// and pooling modes (given, or detected in ModeAuto) it parses the body,
// validating it, and reads the routing text off the parse as Normalize
// does.
func RouteKey(canonical []byte, opts KeyOptions) (RouteInfo, error) {
	n, err := checkKeyOptions(opts)
	if err != nil {
		return RouteInfo{}, err
	}
	if opts.Mode >= ModeResponses {
		return routeKeyTree(canonical, opts)
	}
	ks := keyPool.Get().(*keyScratch)
	defer keyPool.Put(ks)
	var bh *blockHasher
	if opts.Blocks {
		bh = &ks.bh
		bh.reset()
	}
	b := canonical
	top := topMembers{chatText: ks.chat[:0], promptText: ks.prompt[:0]}
	// Text past 8N characters cannot change any key; 4 bytes per character
	// bounds how much to collect.
	err = ks.readTop(&top, b, opts.Mode, 4*spillCap(n)+4, bh)
	ks.chat, ks.prompt = top.chatText, top.promptText
	if err != nil {
		return RouteInfo{}, err
	}
	mode, err := top.mode(opts.Mode)
	if err != nil {
		return RouteInfo{}, err
	}
	if mode >= ModeResponses {
		opts.Mode = mode
		return routeKeyTree(canonical, opts)
	}
	group, model, err := ks.appendNames(b, &top, opts.Group)
	if err != nil {
		return RouteInfo{}, err
	}
	var toolsJSON []byte
	if top.tools.ok() {
		toolsJSON = b[top.tools.start:top.tools.end]
	}
	return ks.finish(opts, n, mode, group, model, toolsJSON, top.chatText, top.promptText, b, bh)
}

// topMembers is what RouteKey reads from the top-level members of a body:
// where the values it keys on sit, and the chat and completion records.
type topMembers struct {
	model, tools, pk    span
	object              bool
	hasMessages, chatOK bool
	hasPrompt           bool
	// has and inputItems are what ModeAuto's detection reads (see
	// promptMembers.detect).
	has                  promptMembers
	inputItems           bool
	promptErr            error // a schema error, reported if the mode needs the prompt
	chatText, promptText []byte
}

// readTop reads the top-level members of b into top, checking the
// structure of the object; a body that is not an object has none.
func (ks *keyScratch) readTop(top *topMembers, b []byte, mode Mode, budget int, bh *blockHasher) error {
	i := skipWS(b, 0)
	if i >= len(b) {
		return newErr(i, CodeUnexpectedEnd, ErrInvalid, "empty body")
	}
	if b[i] != '{' {
		return nil
	}
	top.object = true
	i = skipWS(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] != '"' {
			return structErr(i, "want a member name")
		}
		ke, err := stringEnd(b, i)
		if err != nil {
			return err
		}
		name := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return structErr(i, "want ':'")
		}
		vs := skipWS(b, i+1)
		if vs >= len(b) {
			return structErr(vs, "want a value")
		}
		ve, err := ks.readMember(top, b, name, vs, mode, budget, bh)
		if err != nil {
			return err
		}
		if ve < 0 {
			if ve, err = valueEnd(b, vs); err != nil {
				return err
			}
		}
		if top.model.start == vs || top.tools.start == vs || top.pk.start == vs {
			top.model.end, top.tools.end, top.pk.end = fixEnd(top.model, vs, ve), fixEnd(top.tools, vs, ve), fixEnd(top.pk, vs, ve)
		}
		i = skipWS(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == '}' {
				return structErr(i, "trailing comma")
			}
		} else if i >= len(b) || b[i] != '}' {
			return structErr(i, "want ',' or '}'")
		}
	}
	if i >= len(b) {
		return structErr(i, "unterminated object")
	}
	return nil
}

// readMember notes the top-level member name whose value starts at vs, and
// reads the messages or the prompt when the mode may need them. It returns
// where the value ends when it read the value, else -1.
func (ks *keyScratch) readMember(top *topMembers, b, name []byte, vs int, mode Mode, budget int, bh *blockHasher) (int, error) {
	ve := -1
	top.has.note(name)
	switch string(name) {
	case "input":
		if mode == ModeAuto {
			var err error
			top.inputItems, ve, err = inputHoldsItems(b, vs)
			return ve, err
		}
	case "model":
		top.model = span{vs, vs + 1}
	case "tools":
		top.tools = span{vs, vs + 1}
	case "prompt_cache_key":
		if b[vs] == '"' {
			top.pk = span{vs, vs + 1}
		}
	case "messages":
		top.hasMessages = true
		if (mode == ModeAuto || mode == ModeChat) && b[vs] == '[' {
			top.chatOK = true
			var err error
			if top.chatText, ve, err = appendMessages(top.chatText, b, vs, budget, &ks.role, bh); err != nil {
				return ve, err
			}
		}
	case "prompt":
		top.hasPrompt = true
		if mode == ModeAuto || mode == ModeCompletion {
			if bh != nil {
				budget = len(b) // the whole prompt, for its blocks
			}
			top.promptText, ve, top.promptErr = appendPrompt(top.promptText, b, vs, budget)
			if top.promptErr != nil && !isSchema(top.promptErr) {
				return ve, top.promptErr
			}
		}
	}
	return ve, nil
}

// mode returns the mode the body is keyed in: opts' mode, or in auto mode
// the one its members say; and a schema error when the body does not fit.
func (top *topMembers) mode(m Mode) (Mode, error) {
	if m == ModeAuto && top.object {
		m = top.has.detect(func() bool { return top.inputItems })
	}
	if m == ModeAuto {
		m = ModeNative
	}
	switch m {
	case ModeChat:
		if !top.object || !top.chatOK {
			return m, newErr(0, CodeSchema, ErrSchema, "a chat request needs a messages array")
		}
	case ModeCompletion:
		if !top.object || !top.hasPrompt {
			return m, newErr(0, CodeSchema, ErrSchema, "a completion request needs a prompt")
		}
		if top.promptErr != nil {
			return m, top.promptErr
		}
	}
	return m, nil
}

// appendNames unescapes into ks.names the body's prompt_cache_key (when
// no group is given) and its model.
func (ks *keyScratch) appendNames(b []byte, top *topMembers, group string) (pk, model []byte, err error) {
	kb := ks.names[:0]
	if group == "" && top.pk.ok() {
		if kb, _, err = appendString(kb, b, top.pk.start); err != nil {
			return nil, nil, err
		}
	}
	gEnd := len(kb)
	if top.model.ok() && b[top.model.start] == '"' {
		if kb, _, err = appendString(kb, b, top.model.start); err != nil {
			return nil, nil, err
		}
	}
	ks.names = kb
	return kb[:gEnd], kb[gEnd:], nil
}

// finish assembles the key's frame (mode, group, model, routing text) and
// derives the RouteInfo from it. group is the body's prompt_cache_key,
// used when opts.Group is empty; toolsJSON is the canonical tools value of
// a chat body; chatText and promptText are the records of chat and
// completion mode; body is the canonical body, read in native mode.
func (ks *keyScratch) finish(opts KeyOptions, n int, mode Mode, group, model, toolsJSON, chatText, promptText, body []byte, bh *blockHasher) (RouteInfo, error) {
	ri := RouteInfo{Mode: mode}
	f := append(ks.frame[:0], byte(mode))
	// Group.
	gstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	if opts.Group != "" {
		f = append(f, opts.Group...)
	} else {
		f = append(f, group...)
	}
	binary.LittleEndian.PutUint32(f[gstart-4:], uint32(len(f)-gstart))
	// Model.
	mstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	f = append(f, model...)
	binary.LittleEndian.PutUint32(f[mstart-4:], uint32(len(f)-mstart))
	// Routing text.
	tstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	var toolsRec []byte
	switch mode {
	case ModeChat:
		if toolsJSON != nil {
			f = append(f, "tools"...)
			f = append(f, unitSep)
			f = append(f, toolsJSON...)
			f = append(f, recordSep)
			toolsRec = f[tstart:]
		}
		f = append(f, chatText...)
	case ModeCompletion:
		f = append(f, promptText...)
	default:
		var err error
		if f, err = appendNativeText(f, body, spillCap(n)+1); err != nil {
			return RouteInfo{}, err
		}
	}
	ks.frame = f
	if opts.Group != "" {
		ri.Group = opts.Group
	} else {
		ri.Group = string(f[gstart : mstart-4])
	}
	ri.Model = string(f[mstart : tstart-4])

	text := f[tstart:]
	var cur charCursor
	cur.bytes = mode == ModeNative
	if bh != nil && !cur.bytes {
		// The block hasher counts the characters of the chat records (or
		// the prompt) as it hashes them; the cut starts from its counts.
		if mode == ModeCompletion {
			bh.reset()
			bh.record(promptText)
		}
		cur.marks = bh.marks
		if toolsRec != nil {
			cur.base = len(toolsRec)
			cur.baseChars = len(toolsRec) - continuationBytes(text[:len(toolsRec)])
		}
	}
	ri.keys(f, tstart, n, &cur)
	if bh != nil {
		if toolsRec != nil {
			toolsRec = f[tstart : tstart+len(toolsRec)]
		}
		ri.Blocks, ri.PromptTokens, ri.chatSeed = prefixBlocks(bh, f[:tstart-4], mode, body, toolsRec, promptText)
		ri.chatChain, ri.chatBlocks = bh.chain, mode == ModeChat
	}
	return ri, nil
}

// keys sets the key and the spill keys of the frame f, whose routing text
// starts at tstart, cut by cur to windows N, 2N, 4N and 8N.
func (ri *RouteInfo) keys(f []byte, tstart, n int, cur *charCursor) {
	text := f[tstart:]
	end, longer := cur.cut(text, n)
	ri.RoutingTextLen = cur.count
	ri.Key = hashFrame(f, tstart, end)
	if longer {
		ri.SpillKeys = make([]uint64, 0, spillWindows)
	}
	for w := n; longer && len(ri.SpillKeys) < spillWindows; {
		w *= 2
		end, longer = cur.cut(text, w)
		ri.SpillKeys = append(ri.SpillKeys, hashFrame(f, tstart, end))
	}
}

// prefixBlocks assembles RouteInfo.Blocks: head (mode, group and model, as
// in the key's frame) seeds the chain; in chat mode the tools record
// (toolsRec, nil without tools) comes first, then the message blocks bh
// collected; in completion mode the prompt text; in native mode the
// canonical body. It also returns the seed the message blocks were mixed
// with (for AnswerBlocks).
func prefixBlocks(bh *blockHasher, head []byte, mode Mode, body, toolsRec []byte, promptText []byte) ([]uint64, int, uint64) {
	seed := xxh3.Hash(head)
	var t blockHasher
	t.chain = seed
	switch mode {
	case ModeChat:
		if toolsRec != nil {
			t.record(toolsRec)
		}
	case ModeCompletion:
		// finish has hashed promptText already, for the cut's counts.
	default:
		bh.reset()
		bh.record(body)
		bh.chars = len(body)
	}
	out := make([]uint64, 0, len(t.blocks)+len(bh.blocks))
	out = append(out, t.blocks...)
	for _, c := range bh.blocks {
		out = append(out, seedBlock(c, t.chain))
	}
	return out, (t.chars + bh.chars + 3) / 4, t.chain
}

func fixEnd(s span, vs, ve int) int {
	if s.start == vs {
		return ve
	}
	return s.end
}

func isSchema(err error) bool {
	se, ok := err.(*SyntaxError)
	return ok && se.code == CodeSchema
}

func spillCap(n int) int { return n << spillWindows }

func hashFrame(f []byte, tstart, end int) uint64 {
	binary.LittleEndian.PutUint32(f[tstart-4:], uint32(end))
	return xxh3.Hash(f[:tstart+end])
}

// charCursor cuts a text at growing character (or byte) counts without
// rescanning what it has already counted.
type charCursor struct {
	bytes bool
	i     int // byte offset reached
	count int // characters before i
	// marks are places in text past base whose characters are known
	// (base's baseChars plus the mark's), so the count can jump to them.
	marks           []charMark
	base, baseChars int
}

// cut returns the byte length of the first n characters and whether the
// text is longer than that; count is left at min(n, characters in text).
func (c *charCursor) cut(text []byte, n int) (int, bool) {
	if c.bytes {
		if len(text) > n {
			c.count = n
			return n, true
		}
		c.count = len(text)
		return len(text), false
	}
	i, count := c.i, c.count
	if len(c.marks) > 0 {
		// The last mark within both n characters and the text: the cut
		// is at or past it.
		j := sort.Search(len(c.marks), func(k int) bool {
			m := c.marks[k]
			return c.baseChars+m.chars > n || c.base+m.end > len(text)
		})
		if j > 0 {
			if m := c.marks[j-1]; c.base+m.end > i {
				i, count = c.base+m.end, c.baseChars+m.chars
			}
		}
	}
	// Whole words while they cannot pass n, four at a time first (see
	// continuationBytes).
	for i+32 <= len(text) && count+32 <= n {
		v0, v1 := binary.LittleEndian.Uint64(text[i:]), binary.LittleEndian.Uint64(text[i+8:])
		v2, v3 := binary.LittleEndian.Uint64(text[i+16:]), binary.LittleEndian.Uint64(text[i+24:])
		count += 32
		if (v0|v1|v2|v3)&msb != 0 {
			count -= continuationsIn(v0) + continuationsIn(v1) + continuationsIn(v2) + continuationsIn(v3)
		}
		i += 32
	}
	for i+8 <= len(text) && count+8 <= n {
		v := binary.LittleEndian.Uint64(text[i:])
		count += 8 - bits.OnesCount64(v&^(v<<1)&msb)
		i += 8
	}
	for ; i < len(text); i++ {
		if text[i]&0xC0 != 0x80 {
			if count == n {
				c.i, c.count = i, count
				return i, true
			}
			count++
		}
	}
	c.i, c.count = i, count
	return len(text), false
}

func structErr(i int, what string) error {
	return newErr(i, CodeInvalidCharacter, ErrInvalid, "malformed canonical body: %s", what)
}

// stringEnd returns the index after the closing quote of the string at b[i].
func stringEnd(b []byte, i int) (int, error) {
	j := i + 1
	for {
		for j+8 <= len(b) && quoteFreeWord(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		if j >= len(b) {
			return j, structErr(i, "unterminated string")
		}
		switch b[j] {
		case '"':
			return j + 1, nil
		case '\\':
			j += 2
		default:
			j++
		}
	}
}

func quoteFreeWord(v uint64) bool {
	q := v ^ (lsb * '"')
	q = (q - lsb) & ^q
	bs := v ^ (lsb * '\\')
	bs = (bs - lsb) & ^bs
	return (q|bs)&msb == 0
}

// valueEnd returns the index after the value starting at b[i].
func valueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, structErr(i, "want a value")
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				e, err := stringEnd(b, j)
				if err != nil {
					return e, err
				}
				j = e
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
			j++
		}
		return len(b), structErr(i, "unterminated container")
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
			if j == i {
				return j, structErr(i, "want a value")
			}
			return j, nil
		}
		j++
	}
	return j, nil
}

// appendString appends the unescaped text of the string at b[i] == '"' and
// returns the index after it, in one pass.
func appendString(dst, b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return dst, i, structErr(i, "want a string")
	}
	j := i + 1
	for {
		run := j
		for j+8 <= len(b) && quoteFreeWord(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		for j < len(b) && b[j] != '"' && b[j] != '\\' {
			j++
		}
		dst = append(dst, b[run:j]...)
		if j+1 >= len(b) {
			if j < len(b) && b[j] == '"' {
				return dst, j + 1, nil
			}
			return dst, j, structErr(i, "unterminated string")
		}
		if b[j] == '"' {
			return dst, j + 1, nil
		}
		switch e := b[j+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'u':
			if j+6 > len(b) {
				return dst, j, structErr(j, "bad escape")
			}
			r := rune(0)
			for _, h := range b[j+2 : j+6] {
				d := unhex(h)
				if d < 0 {
					return dst, j, structErr(j, "bad escape")
				}
				r = r<<4 | d
			}
			if r >= 0xD800 && r <= 0xDFFF {
				// Canonical bodies hold characters raw; a surrogate escape
				// means the caller skipped canonicalization.
				return dst, j, structErr(j, "surrogate escape in a canonical body")
			}
			dst = utf8.AppendRune(dst, r)
			j += 6
			continue
		default:
			return dst, j, structErr(j, "bad escape")
		}
		j += 2
	}
}

// appendMessages appends the chat routing records of the messages array at
// b[i] == '[': every message but the final one (a lone message counts).
// It returns the index after the array.
//
// With bh set, every message is read (past the budget too) and its record
// hashed into blocks; records past the budget are not kept in dst.
func appendMessages(dst, b []byte, i, budget int, role *[]byte, bh *blockHasher) ([]byte, int, error) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return dst, i + 1, nil
	}
	count := 0
	full := false
	for {
		if i >= len(b) {
			return dst, i, structErr(i, "unterminated array")
		}
		count++
		start := len(dst)
		var end int
		var err error
		if full && bh == nil {
			end, err = valueEnd(b, i)
		} else {
			dst, end, err = appendMessage(dst, b, i, role)
		}
		if err != nil {
			return dst, end, err
		}
		if bh != nil {
			bh.record(dst[start:])
			if full {
				dst = dst[:start]
			}
		}
		next := skipWS(b, end)
		if next >= len(b) || (b[next] != ',' && b[next] != ']') {
			return dst, next, structErr(next, "want ',' or ']'")
		}
		last := b[next] == ']'
		if last && count > 1 && !full {
			dst = dst[:start]
		}
		if len(dst) > budget {
			full = true
		}
		if last {
			return dst, next + 1, nil
		}
		i = skipWS(b, next+1)
	}
}

// appendMessage appends "role US text RS" for the message at b[i]. Canonical
// order puts content before role, so the text is written first and the role
// moved in front of it.
func appendMessage(dst, b []byte, i int, role *[]byte) ([]byte, int, error) {
	start := len(dst)
	r := (*role)[:0]
	if b[i] != '{' {
		end, err := valueEnd(b, i)
		return append(dst, unitSep, recordSep), end, err
	}
	end, err := eachMemberAt(b, i, func(name []byte, vs int) (int, error) {
		var ve int
		var err error
		switch string(name) {
		case "role":
			if b[vs] == '"' {
				r, ve, err = appendString(r[:0], b, vs)
				return ve, err
			}
		case "content":
			dst, ve, err = appendContent(dst, b, vs)
			return ve, err
		}
		return valueEnd(b, vs)
	})
	*role = r
	if err != nil {
		return dst, end, err
	}
	n := len(dst)
	dst = append(dst, r...)
	dst = append(dst, unitSep)
	copy(dst[start+len(r)+1:], dst[start:n])
	copy(dst[start:], r)
	dst[start+len(r)] = unitSep
	return append(dst, recordSep), end, nil
}

// eachMemberAt walks the object at b[i] == '{'; fn reads the value at vs and
// returns the index after it. It returns the index after the object.
func eachMemberAt(b []byte, i int, fn func(name []byte, vs int) (int, error)) (int, error) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, structErr(i, "want a member name")
		}
		ke, err := stringEnd(b, i)
		if err != nil {
			return ke, err
		}
		name := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return i, structErr(i, "want ':'")
		}
		vs := skipWS(b, i+1)
		if vs >= len(b) {
			return vs, structErr(vs, "want a value")
		}
		ve, err := fn(name, vs)
		if err != nil {
			return ve, err
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return i, structErr(i, "unterminated object")
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, structErr(i, "want ',' or '}'")
		}
		i = skipWS(b, i+1)
	}
}

// appendContent appends a message's text: a string as is; for an array of
// parts, text parts by their text and other parts by their canonical JSON,
// joined by '\n'; nothing for null.
func appendContent(dst, b []byte, i int) ([]byte, int, error) {
	switch b[i] {
	case '"':
		return appendString(dst, b, i)
	case '[':
	default:
		end, err := valueEnd(b, i)
		if err != nil || b[i] == 'n' {
			return dst, end, err
		}
		return append(dst, b[i:end]...), end, nil
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return dst, i + 1, nil
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, '\n')
		}
		start := len(dst)
		var end int
		var err error
		switch {
		case i < len(b) && b[i] == '"':
			dst, end, err = appendString(dst, b, i)
		case i < len(b) && b[i] == '{':
			isText, hasText := false, false
			end, err = eachMemberAt(b, i, func(name []byte, vs int) (int, error) {
				switch string(name) {
				case "text":
					if b[vs] == '"' {
						hasText = true
						var ve int
						var err error
						dst, ve, err = appendString(dst, b, vs)
						return ve, err
					}
				case "type":
					ve, err := valueEnd(b, vs)
					isText = string(b[vs:ve]) == `"text"`
					return ve, err
				}
				return valueEnd(b, vs)
			})
			if err == nil && !(isText && hasText) {
				dst = append(dst[:start], b[i:end]...)
			}
		default:
			end, err = valueEnd(b, i)
			if err == nil {
				dst = append(dst, b[i:end]...)
			}
		}
		if err != nil {
			return dst, end, err
		}
		next := skipWS(b, end)
		if next >= len(b) || (b[next] != ',' && b[next] != ']') {
			return dst, next, structErr(next, "want ',' or ']'")
		}
		if b[next] == ']' {
			return dst, next + 1, nil
		}
		i = skipWS(b, next+1)
	}
}

// appendPrompt appends the completion routing text of the prompt at b[i]:
// a string as is; an array as its elements (strings unescaped, anything
// else as canonical JSON), each followed by RS. It returns the index after
// the prompt; a prompt of another type gives a schema error.
func appendPrompt(dst, b []byte, i, budget int) ([]byte, int, error) {
	switch b[i] {
	case '"':
		return appendString(dst, b, i)
	case '[':
	default:
		end, err := valueEnd(b, i)
		if err != nil {
			return dst, end, err
		}
		return dst, end, newErr(i, CodeSchema, ErrSchema, "prompt must be a string or an array")
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return dst, i + 1, nil
	}
	for {
		var end int
		var err error
		switch {
		case len(dst) > budget:
			end, err = valueEnd(b, i)
		case i < len(b) && b[i] == '"':
			dst, end, err = appendString(dst, b, i)
			dst = append(dst, recordSep)
		default:
			end, err = valueEnd(b, i)
			if err == nil {
				dst = append(dst, b[i:end]...)
				dst = append(dst, recordSep)
			}
		}
		if err != nil {
			return dst, end, err
		}
		next := skipWS(b, end)
		if next >= len(b) || (b[next] != ',' && b[next] != ']') {
			return dst, next, structErr(next, "want ',' or ']'")
		}
		if b[next] == ']' {
			return dst, next + 1, nil
		}
		i = skipWS(b, next+1)
	}
}

// inputHoldsItems reads the input value at b[i] and reports whether it
// holds Responses items (parser.itemsInput): a string, or a non-empty
// array of objects. It returns the index after the value.
func inputHoldsItems(b []byte, i int) (bool, int, error) {
	if b[i] == '"' {
		end, err := stringEnd(b, i)
		return true, end, err
	}
	if b[i] != '[' {
		end, err := valueEnd(b, i)
		return false, end, err
	}
	items := true
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return false, i + 1, nil
	}
	for {
		if i >= len(b) {
			return false, i, structErr(i, "unterminated array")
		}
		items = items && b[i] == '{'
		end, err := valueEnd(b, i)
		if err != nil {
			return false, end, err
		}
		next := skipWS(b, end)
		if next >= len(b) || (b[next] != ',' && b[next] != ']') {
			return false, next, structErr(next, "want ',' or ']'")
		}
		if b[next] == ']' {
			return items, next + 1, nil
		}
		i = skipWS(b, next+1)
	}
}

type span struct{ start, end int }

func (s span) ok() bool { return s.end > s.start }
