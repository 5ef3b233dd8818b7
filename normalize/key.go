package normalize

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
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
	// Mode is the routing mode; ModeAuto detects it from the body (chat,
	// completion, else native).
	Mode Mode
	// Group is the explicit group id (≤ 64 printable ASCII); empty means the
	// body's prompt_cache_key, if any.
	Group string
	// PrefixLength is N, the routing window: characters (Unicode code
	// points) in chat and completion mode, bytes in native mode. 0 means
	// 4096; otherwise it must be within 1024..65536.
	PrefixLength int
}

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
	frame, role  []byte
	chat, prompt textBuf
}

var keyPool = sync.Pool{New: func() any { return new(keyScratch) }}

// Normalize canonicalizes src into dst and computes the routing key of the
// canonical form. A KeyOptions mode of ModeAuto follows the schema that
// canonicalization used.
func Normalize(dst, src []byte, opts Options, kopts KeyOptions) ([]byte, RouteInfo, error) {
	start := len(dst)
	out, mode, err := AppendCanonical(dst, src, opts)
	if err != nil {
		return dst, RouteInfo{}, err
	}
	if kopts.Mode == ModeAuto {
		kopts.Mode = mode
		if mode == ModeAuto {
			kopts.Mode = ModeNative
		}
	}
	ri, err := RouteKey(out[start:], kopts)
	if err != nil {
		return dst, RouteInfo{}, err
	}
	return out, ri, nil
}

// RouteKey computes the routing key of a canonical body, as returned by
// AppendCanonical. It reads the body in one pass and checks its structure,
// but does not validate it: the key of bytes that are not canonical may
// differ from the key of their canonical form.
func RouteKey(canonical []byte, opts KeyOptions) (RouteInfo, error) {
	n := opts.PrefixLength
	if n == 0 {
		n = DefaultPrefixLength
	}
	if n < MinPrefixLength || n > MaxPrefixLength {
		return RouteInfo{}, &optionError{code: CodePrefixLength, msg: fmt.Sprintf("prefix length %d is outside %d..%d", n, MinPrefixLength, MaxPrefixLength)}
	}
	if len(opts.Group) > MaxGroupBytes {
		return RouteInfo{}, &optionError{code: CodeInvalidGroup, msg: fmt.Sprintf("group id of %d bytes is over %d", len(opts.Group), MaxGroupBytes)}
	}
	for i := 0; i < len(opts.Group); i++ {
		if c := opts.Group[i]; c < 0x20 || c > 0x7e {
			return RouteInfo{}, &optionError{code: CodeInvalidGroup, msg: fmt.Sprintf("group id has a non-printable byte 0x%02x at %d", c, i)}
		}
	}
	ks := keyPool.Get().(*keyScratch)
	defer keyPool.Put(ks)
	// Text past 8N characters cannot change any key; 4 bytes per character
	// bounds how much to collect.
	budget := 4*spillCap(n) + 4
	b := canonical
	var (
		model, tools, pk     span
		hasMessages, chatOK  bool
		hasPrompt            bool
		promptErr, chatErr   error
		object               bool
		chatText, promptText = &ks.chat, &ks.prompt
		wantChat, wantPrompt = opts.Mode == ModeAuto || opts.Mode == ModeChat, opts.Mode == ModeAuto || opts.Mode == ModeCompletion
	)
	chatText.reset(headerRoom)
	promptText.reset(headerRoom)
	i := skipWS(b, 0)
	if i >= len(b) {
		return RouteInfo{}, newErr(i, CodeUnexpectedEnd, ErrInvalid, "empty body")
	}
	if b[i] == '{' {
		object = true
		i = skipWS(b, i+1)
		for i < len(b) && b[i] != '}' {
			if b[i] != '"' {
				return RouteInfo{}, structErr(i, "want a member name")
			}
			ke, err := stringEnd(b, i)
			if err != nil {
				return RouteInfo{}, err
			}
			name := b[i+1 : ke-1]
			i = skipWS(b, ke)
			if i >= len(b) || b[i] != ':' {
				return RouteInfo{}, structErr(i, "want ':'")
			}
			vs := skipWS(b, i+1)
			if vs >= len(b) {
				return RouteInfo{}, structErr(vs, "want a value")
			}
			ve := -1
			switch string(name) {
			case "model":
				model = span{vs, vs + 1}
			case "tools":
				tools = span{vs, vs + 1}
			case "prompt_cache_key":
				if b[vs] == '"' {
					pk = span{vs, vs + 1}
				}
			case "messages":
				hasMessages = true
				if wantChat && b[vs] == '[' {
					chatOK = true
					if tools.ok() && chatText.len() == 0 {
						// Canonical order puts tools before messages: leave
						// room to put their record in front without a copy.
						chatText.reset(headerRoom + len("tools") + 2 + tools.end - tools.start)
					}
					ve, chatErr = appendMessages(chatText, b, vs, budget, &ks.role)
					if chatErr != nil {
						return RouteInfo{}, chatErr
					}
				}
			case "prompt":
				hasPrompt = true
				if wantPrompt {
					ve, promptErr = appendPrompt(promptText, b, vs, budget)
					if promptErr != nil && !isSchema(promptErr) {
						return RouteInfo{}, promptErr
					}
				}
			}
			if ve < 0 {
				var err error
				if ve, err = valueEnd(b, vs); err != nil {
					return RouteInfo{}, err
				}
			}
			if model.start == vs || tools.start == vs || pk.start == vs {
				model.end, tools.end, pk.end = fixEnd(model, vs, ve), fixEnd(tools, vs, ve), fixEnd(pk, vs, ve)
			}
			i = skipWS(b, ve)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				if i < len(b) && b[i] == '}' {
					return RouteInfo{}, structErr(i, "trailing comma")
				}
			} else if i >= len(b) || b[i] != '}' {
				return RouteInfo{}, structErr(i, "want ',' or '}'")
			}
		}
		if i >= len(b) {
			return RouteInfo{}, structErr(i, "unterminated object")
		}
	}
	mode := opts.Mode
	if mode == ModeAuto {
		switch {
		case hasMessages:
			mode = ModeChat
		case hasPrompt:
			mode = ModeCompletion
		default:
			mode = ModeNative
		}
	}
	switch mode {
	case ModeChat:
		if !object || !chatOK {
			return RouteInfo{}, newErr(0, CodeSchema, ErrSchema, "a chat request needs a messages array")
		}
	case ModeCompletion:
		if !object || !hasPrompt {
			return RouteInfo{}, newErr(0, CodeSchema, ErrSchema, "a completion request needs a prompt")
		}
		if promptErr != nil {
			return RouteInfo{}, promptErr
		}
	}

	ri := RouteInfo{Mode: mode}
	f := append(ks.frame[:0], byte(mode))
	// Group.
	gstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	var err error
	if opts.Group != "" {
		f = append(f, opts.Group...)
	} else if pk.ok() {
		if f, _, err = appendString(f, b, pk.start); err != nil {
			return RouteInfo{}, err
		}
	}
	binary.LittleEndian.PutUint32(f[gstart-4:], uint32(len(f)-gstart))
	// Model.
	mstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	if model.ok() && b[model.start] == '"' {
		if f, _, err = appendString(f, b, model.start); err != nil {
			return RouteInfo{}, err
		}
	}
	binary.LittleEndian.PutUint32(f[mstart-4:], uint32(len(f)-mstart))
	ks.frame = f
	if opts.Group != "" {
		ri.Group = opts.Group
	} else {
		ri.Group = string(f[gstart : mstart-4])
	}
	ri.Model = string(f[mstart:])

	// Routing text: frame is header ++ u32le(len) ++ text; text is pre ++
	// the collected text.
	var (
		t     *textBuf
		frame []byte
		pre   int
	)
	switch mode {
	case ModeChat:
		t = chatText
		if tools.ok() {
			pre = len("tools") + 2 + tools.end - tools.start
		}
	case ModeCompletion:
		t = promptText
	default:
		// Native: bytes, no characters to count.
		tstart := len(f) + 4
		f = append(f, 0, 0, 0, 0)
		f = append(f, b[:min(len(b), spillCap(n)+1)]...)
		ks.frame = f
		text := f[tstart:]
		cut := func(w int) (int, bool) {
			if len(text) > w {
				return w, true
			}
			return len(text), false
		}
		end, longer := cut(n)
		ri.RoutingTextLen = end
		ri.Key = hashFrame(f, tstart, end)
		if longer {
			ri.SpillKeys = make([]uint64, 0, spillWindows)
		}
		for w := n; longer && len(ri.SpillKeys) < spillWindows; {
			w *= 2
			end, longer = cut(w)
			ri.SpillKeys = append(ri.SpillKeys, hashFrame(f, tstart, end))
		}
		return ri, nil
	}
	tstart := len(f) + 4
	if fs := t.base - pre - tstart; fs >= 0 {
		// The header and the tools record fit in the room left in front of
		// the text: no copy of the text.
		frame = t.b[fs:]
		copy(frame, f)
		if pre > 0 {
			appendToolsRecord(frame[tstart:tstart], b[tools.start:tools.end])
		}
	} else {
		frame = append(f, 0, 0, 0, 0)
		if pre > 0 {
			frame = appendToolsRecord(frame, b[tools.start:tools.end])
		}
		frame = append(frame, t.text()...)
		ks.frame = frame
	}
	cur := cutter{text: frame[tstart:], pre: pre, cps: t.cps}
	cur.preChars = countChars(cur.text[:pre])
	cur.total = cur.preChars + t.chars
	end, longer := cur.cut(n)
	ri.RoutingTextLen = min(n, cur.total)
	ri.Key = hashFrame(frame, tstart, end)
	if longer {
		ri.SpillKeys = make([]uint64, 0, spillWindows)
	}
	for w := n; longer && len(ri.SpillKeys) < spillWindows; {
		w *= 2
		end, longer = cur.cut(w)
		ri.SpillKeys = append(ri.SpillKeys, hashFrame(frame, tstart, end))
	}
	return ri, nil
}

// appendToolsRecord appends "tools" US tools RS.
func appendToolsRecord(dst, tools []byte) []byte {
	dst = append(dst, "tools"...)
	dst = append(dst, unitSep)
	dst = append(dst, tools...)
	return append(dst, recordSep)
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

// headerRoom is the room a textBuf leaves in front of its text for the key
// frame's header (mode, group, model, length fields), so the text is hashed
// where it was written.
const headerRoom = 256

// cpEvery is the distance, in characters, between a textBuf's checkpoints.
const cpEvery = 512

// flushEvery bounds the bytes textBuf.str writes between two character
// counts: fewer than 256, so a byte lane's count of continuation bytes
// cannot overflow.
const flushEvery = 240

// checkpoint is a position in a text and the number of characters (bytes
// that are not UTF-8 continuation bytes) before it.
type checkpoint struct{ off, chars int }

// textBuf collects a routing text, counting its characters as it is written
// and leaving a checkpoint every cpEvery characters, so the windows of the
// key and the spill keys are found without another pass over the text.
type textBuf struct {
	b     []byte // b[:base] is room for the frame header; the text follows
	base  int
	chars int // characters in the text
	next  int // chars at which the next checkpoint is due
	cps   []checkpoint
}

func (t *textBuf) reset(base int) {
	if cap(t.b) < base {
		t.b = make([]byte, base, 2*base+4096)
	}
	t.b = t.b[:base]
	t.base = base
	t.chars = 0
	t.next = cpEvery
	t.cps = t.cps[:0]
}

func (t *textBuf) len() int     { return len(t.b) - t.base }
func (t *textBuf) text() []byte { return t.b[t.base:] }

type textMark struct{ n, chars, next, ncps int }

func (t *textBuf) mark() textMark { return textMark{len(t.b), t.chars, t.next, len(t.cps)} }

// undo drops what was written since m.
func (t *textBuf) undo(m textMark) {
	t.b, t.chars, t.next, t.cps = t.b[:m.n], m.chars, m.next, t.cps[:m.ncps]
}

// ascii appends one ASCII byte.
func (t *textBuf) ascii(c byte) {
	t.b = append(t.b, c)
	t.chars++
}

// raw appends p as is.
func (t *textBuf) raw(p []byte) {
	off := t.len()
	t.b = append(t.b, p...)
	chars := t.chars
	i := 0
	for ; i+8 <= len(p); i += 8 {
		if chars >= t.next {
			t.cps = append(t.cps, checkpoint{off + i, chars})
			t.next = chars + cpEvery
		}
		v := binary.LittleEndian.Uint64(p[i:])
		chars += 8 - bits.OnesCount64(v&^(v<<1)&msb)
	}
	for ; i < len(p); i++ {
		if p[i]&0xC0 != 0x80 {
			chars++
		}
	}
	t.chars = chars
}

// insert puts p followed by the byte c at the position m was taken, moving
// what was written since.
func (t *textBuf) insert(m textMark, p []byte, c byte) {
	k := len(p) + 1
	n := len(t.b)
	t.b = append(t.b, p...)
	t.b = append(t.b, c)
	copy(t.b[m.n+k:], t.b[m.n:n])
	copy(t.b[m.n:], p)
	t.b[m.n+k-1] = c
	pc := countChars(p) + 1
	t.chars += pc
	for j := m.ncps; j < len(t.cps); j++ {
		t.cps[j].off += k
		t.cps[j].chars += pc
	}
}

// countChars counts the bytes of p that are not UTF-8 continuation bytes.
func countChars(p []byte) int {
	chars, i := 0, 0
	for ; i+8 <= len(p); i += 8 {
		v := binary.LittleEndian.Uint64(p[i:])
		chars += 8 - bits.OnesCount64(v&^(v<<1)&msb)
	}
	for ; i < len(p); i++ {
		if p[i]&0xC0 != 0x80 {
			chars++
		}
	}
	return chars
}

// unescapeByte maps the byte after a backslash to the byte it stands for;
// 0 for 'u' and for bytes that cannot follow a backslash.
var unescapeByte = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// str appends the unescaped text of the string at b[i] == '"' and returns
// the index after it, in one pass: 8 bytes at a time up to the next quote
// or backslash, whatever the bytes are (multi-byte characters included),
// counting characters on the way.
func (t *textBuf) str(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, structErr(i, "want a string")
	}
	j := i + 1
	// d is written up to its capacity; n is the length written.
	d := t.b[:cap(t.b)]
	n := len(t.b)
	chars, next := t.chars, t.next
	for {
		// Fast path: whole words, and the escapes that stand for one byte.
		// Continuation bytes are summed per byte lane in lanes and folded
		// into chars at least every flushEvery bytes, before a lane can
		// overflow: chars is exact at nf.
		nf, lanes := n, uint64(0)
		for j+8 <= len(b) {
			if n-nf >= flushEvery {
				chars += n - nf - int((lanes*lsb)>>56)
				nf, lanes = n, 0
				if chars >= next {
					t.cps = append(t.cps, checkpoint{n - t.base, chars})
					next = chars + cpEvery
				}
			}
			if n+8 > len(d) {
				d = slices.Grow(d[:n], 64)
				d = d[:cap(d)]
			}
			v := binary.LittleEndian.Uint64(b[j : j+8])
			binary.LittleEndian.PutUint64(d[n:n+8], v)
			q := v ^ (lsb * '"')
			q = (q - lsb) &^ q
			bs := v ^ (lsb * '\\')
			bs = (bs - lsb) &^ bs
			stop := (q | bs) & msb
			cont := v &^ (v << 1) & msb
			if stop == 0 {
				lanes += cont >> 7
				j += 8
				n += 8
				continue
			}
			// The lowest flagged byte is exact; the run ends there.
			k := bits.TrailingZeros64(stop) >> 3
			lanes += (cont & (1<<(8*k) - 1)) >> 7
			j += k
			n += k
			if b[j] == '"' || j+1 >= len(b) {
				break
			}
			c := unescapeByte[b[j+1]]
			if c == 0 {
				break
			}
			// n < the end of the word just stored, so d has room. The
			// byte is ASCII: one character, no lane.
			d[n] = c
			n++
			j += 2
		}
		chars += n - nf - int((lanes*lsb)>>56)
		// Slow path: the tail of the input, the end of the string, \u
		// escapes and errors.
		for j < len(b) && b[j] != '"' && b[j] != '\\' {
			if b[j]&0xC0 != 0x80 {
				chars++
			}
			d = append(d[:n], b[j])
			d = d[:cap(d)]
			n++
			j++
		}
		t.b, t.chars, t.next = d[:n], chars, next
		if j+1 >= len(b) {
			if j < len(b) && b[j] == '"' {
				return j + 1, nil
			}
			return j, structErr(i, "unterminated string")
		}
		if b[j] == '"' {
			return j + 1, nil
		}
		// Every escape is one character.
		chars++
		if c := unescapeByte[b[j+1]]; c != 0 {
			d = append(d[:n], c)
		} else if b[j+1] == 'u' {
			if j+6 > len(b) {
				return j, structErr(j, "bad escape")
			}
			r := rune(0)
			for _, h := range b[j+2 : j+6] {
				x := unhex(h)
				if x < 0 {
					return j, structErr(j, "bad escape")
				}
				r = r<<4 | x
			}
			if r >= 0xD800 && r <= 0xDFFF {
				return j, structErr(j, "surrogate escape in a canonical body")
			}
			d = utf8.AppendRune(d[:n], r)
			j += 4
		} else {
			return j, structErr(j, "bad escape")
		}
		n = len(d)
		d = d[:cap(d)]
		j += 2
	}
}

// cutter finds the windows of a routing text, pre ++ the text of a textBuf,
// from the textBuf's character count and checkpoints.
type cutter struct {
	text     []byte
	pre      int // bytes of text before the textBuf's text
	preChars int
	total    int // characters in text
	cps      []checkpoint
	i, count int // a position reached and the characters before it
}

// cut returns the byte length of the first n characters of the text and
// whether the text is longer than that.
func (c *cutter) cut(n int) (int, bool) {
	if c.total <= n {
		return len(c.text), false
	}
	if n >= c.preChars {
		// The last checkpoint with at most n characters before it; the
		// start of the textBuf's text is one too.
		m := n - c.preChars
		lo, hi := 0, len(c.cps)
		for lo < hi {
			h := int(uint(lo+hi) >> 1)
			if c.cps[h].chars <= m {
				lo = h + 1
			} else {
				hi = h
			}
		}
		off, chars := 0, 0
		if lo > 0 {
			off, chars = c.cps[lo-1].off, c.cps[lo-1].chars
		}
		if off += c.pre; off > c.i {
			c.i, c.count = off, chars+c.preChars
		}
	}
	text := c.text
	i, count := c.i, c.count
	// Whole words while they cannot pass n.
	for i+8 <= len(text) && count+8 <= n {
		v := binary.LittleEndian.Uint64(text[i:])
		count += 8 - bits.OnesCount64(v&^(v<<1)&msb)
		i += 8
	}
	for ; i < len(text); i++ {
		if text[i]&0xC0 != 0x80 {
			if count == n {
				break
			}
			count++
		}
	}
	c.i, c.count = i, count
	return i, true
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
func appendMessages(t *textBuf, b []byte, i, budget int, role *[]byte) (int, error) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	count := 0
	full := false
	for {
		if i >= len(b) {
			return i, structErr(i, "unterminated array")
		}
		count++
		start := t.mark()
		var end int
		var err error
		if full {
			end, err = valueEnd(b, i)
		} else {
			end, err = appendMessage(t, b, i, role)
		}
		if err != nil {
			return end, err
		}
		next := skipWS(b, end)
		if next >= len(b) || (b[next] != ',' && b[next] != ']') {
			return next, structErr(next, "want ',' or ']'")
		}
		last := b[next] == ']'
		if last && count > 1 && !full {
			t.undo(start)
		}
		if t.len() > budget {
			full = true
		}
		if last {
			return next + 1, nil
		}
		i = skipWS(b, next+1)
	}
}

// appendMessage appends "role US text RS" for the message at b[i]. Canonical
// order puts content before role, so the text is written first and the role
// moved in front of it.
func appendMessage(t *textBuf, b []byte, i int, role *[]byte) (int, error) {
	start := t.mark()
	r := (*role)[:0]
	if b[i] != '{' {
		end, err := valueEnd(b, i)
		t.ascii(unitSep)
		t.ascii(recordSep)
		return end, err
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
			return appendContent(t, b, vs)
		}
		return valueEnd(b, vs)
	})
	*role = r
	if err != nil {
		return end, err
	}
	t.insert(start, r, unitSep)
	t.ascii(recordSep)
	return end, nil
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
func appendContent(t *textBuf, b []byte, i int) (int, error) {
	switch b[i] {
	case '"':
		return t.str(b, i)
	case '[':
	default:
		end, err := valueEnd(b, i)
		if err != nil || b[i] == 'n' {
			return end, err
		}
		t.raw(b[i:end])
		return end, nil
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for first := true; ; first = false {
		if !first {
			t.ascii('\n')
		}
		start := t.mark()
		var end int
		var err error
		switch {
		case i < len(b) && b[i] == '"':
			end, err = t.str(b, i)
		case i < len(b) && b[i] == '{':
			isText, hasText := false, false
			end, err = eachMemberAt(b, i, func(name []byte, vs int) (int, error) {
				switch string(name) {
				case "text":
					if b[vs] == '"' {
						hasText = true
						return t.str(b, vs)
					}
				case "type":
					ve, err := valueEnd(b, vs)
					isText = string(b[vs:ve]) == `"text"`
					return ve, err
				}
				return valueEnd(b, vs)
			})
			if err == nil && !(isText && hasText) {
				t.undo(start)
				t.raw(b[i:end])
			}
		default:
			end, err = valueEnd(b, i)
			if err == nil {
				t.raw(b[i:end])
			}
		}
		if err != nil {
			return end, err
		}
		next := skipWS(b, end)
		if next >= len(b) || (b[next] != ',' && b[next] != ']') {
			return next, structErr(next, "want ',' or ']'")
		}
		if b[next] == ']' {
			return next + 1, nil
		}
		i = skipWS(b, next+1)
	}
}

// appendPrompt appends the completion routing text of the prompt at b[i]:
// a string as is; an array as its elements (strings unescaped, anything
// else as canonical JSON), each followed by RS. It returns the index after
// the prompt; a prompt of another type gives a schema error.
func appendPrompt(t *textBuf, b []byte, i, budget int) (int, error) {
	switch b[i] {
	case '"':
		return t.str(b, i)
	case '[':
	default:
		end, err := valueEnd(b, i)
		if err != nil {
			return end, err
		}
		return end, newErr(i, CodeSchema, ErrSchema, "prompt must be a string or an array")
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var end int
		var err error
		switch {
		case t.len() > budget:
			end, err = valueEnd(b, i)
		case i < len(b) && b[i] == '"':
			end, err = t.str(b, i)
			t.ascii(recordSep)
		default:
			end, err = valueEnd(b, i)
			if err == nil {
				t.raw(b[i:end])
				t.ascii(recordSep)
			}
		}
		if err != nil {
			return end, err
		}
		next := skipWS(b, end)
		if next >= len(b) || (b[next] != ',' && b[next] != ']') {
			return next, structErr(next, "want ',' or ']'")
		}
		if b[next] == ']' {
			return next + 1, nil
		}
		i = skipWS(b, next+1)
	}
}

type span struct{ start, end int }

func (s span) ok() bool { return s.end > s.start }
