package normalize

import (
	"encoding/binary"
	"fmt"
	"math/bits"
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

type keyScratch struct{ frame []byte }

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

// topLevel holds value ranges of the top-level members a key needs.
type topLevel struct {
	object                             bool
	model, tools, messages, prompt, pk span
}

type span struct{ start, end int }

func (s span) ok() bool { return s.end > s.start }

// RouteKey computes the routing key of a canonical body, as returned by
// AppendCanonical. It checks structure as it reads but does not validate:
// the key of bytes that are not canonical may differ from the key of their
// canonical form.
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
	var top topLevel
	if err := scanTop(canonical, &top); err != nil {
		return RouteInfo{}, err
	}
	mode := opts.Mode
	if mode == ModeAuto {
		switch {
		case top.messages.ok():
			mode = ModeChat
		case top.prompt.ok():
			mode = ModeCompletion
		default:
			mode = ModeNative
		}
	}
	ks := keyPool.Get().(*keyScratch)
	defer keyPool.Put(ks)
	f := ks.frame[:0]

	ri := RouteInfo{Mode: mode}
	f = append(f, byte(mode))
	// Group.
	gstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	var err error
	if opts.Group != "" {
		f = append(f, opts.Group...)
	} else if top.pk.ok() {
		if f, err = appendStringValue(f, canonical, top.pk); err != nil {
			return RouteInfo{}, err
		}
	}
	binary.LittleEndian.PutUint32(f[gstart-4:], uint32(len(f)-gstart))
	ri.Group = string(f[gstart:])
	// Model.
	mstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	if top.model.ok() && canonical[top.model.start] == '"' {
		if f, err = appendStringValue(f, canonical, top.model); err != nil {
			return RouteInfo{}, err
		}
	}
	binary.LittleEndian.PutUint32(f[mstart-4:], uint32(len(f)-mstart))
	ri.Model = string(f[mstart:])
	// Routing text.
	tstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	budget := tstart + 4*spillCap(n) + 4 // bytes enough for more than 8N characters
	switch mode {
	case ModeChat:
		if !top.object || !top.messages.ok() || canonical[top.messages.start] != '[' {
			return RouteInfo{}, newErr(0, CodeSchema, ErrSchema, "a chat request needs a messages array")
		}
		f, err = appendChatText(f, canonical, top, budget)
	case ModeCompletion:
		if !top.object || !top.prompt.ok() {
			return RouteInfo{}, newErr(0, CodeSchema, ErrSchema, "a completion request needs a prompt")
		}
		f, err = appendPromptText(f, canonical, top.prompt, budget)
	default:
		end := min(len(canonical), spillCap(n)+1)
		f = append(f, canonical[:end]...)
	}
	if err != nil {
		return RouteInfo{}, err
	}
	ks.frame = f
	text := f[tstart:]
	cut := cutChars
	if mode == ModeNative {
		cut = cutBytes
	}
	end, longer := cut(text, n)
	ri.RoutingTextLen = n
	if !longer {
		ri.RoutingTextLen = countChars(text)
		if mode == ModeNative {
			ri.RoutingTextLen = len(text)
		}
	}
	ri.Key = hashFrame(f, tstart, end)
	w := n
	for i := 0; i < spillWindows && longer; i++ {
		w *= 2
		end, longer = cut(text, w)
		ri.SpillKeys = append(ri.SpillKeys, hashFrame(f, tstart, end))
	}
	return ri, nil
}

func spillCap(n int) int { return n << spillWindows }

func hashFrame(f []byte, tstart, end int) uint64 {
	binary.LittleEndian.PutUint32(f[tstart-4:], uint32(end))
	return xxh3.Hash(f[:tstart+end])
}

func cutBytes(text []byte, n int) (int, bool) {
	if len(text) > n {
		return n, true
	}
	return len(text), false
}

// cutChars returns the byte length of the first n code points of the UTF-8
// text and whether the text has more than n code points.
func cutChars(text []byte, n int) (int, bool) {
	if len(text) <= n {
		return len(text), false
	}
	i, count := 0, 0
	// Count whole words while they cannot reach n.
	for i+8 <= len(text) && count+8 <= n {
		v := binary.LittleEndian.Uint64(text[i:])
		count += 8 - bits.OnesCount64(v&^(v<<1)&msb)
		i += 8
	}
	for ; i < len(text); i++ {
		if text[i]&0xC0 != 0x80 {
			if count == n {
				return i, true
			}
			count++
		}
	}
	return len(text), false
}

func countChars(text []byte) int {
	i, count := 0, 0
	for ; i+8 <= len(text); i += 8 {
		v := binary.LittleEndian.Uint64(text[i:])
		count += 8 - bits.OnesCount64(v&^(v<<1)&msb)
	}
	for ; i < len(text); i++ {
		if text[i]&0xC0 != 0x80 {
			count++
		}
	}
	return count
}

func structErr(i int, what string) error {
	return newErr(i, CodeInvalidCharacter, ErrInvalid, "malformed canonical body: %s", what)
}

func wsAt(b []byte, i int) int { return skipWS(b, i) }

// scanTop records where the members a key needs sit in a top-level object.
func scanTop(b []byte, top *topLevel) error {
	i := wsAt(b, 0)
	if i >= len(b) {
		return newErr(i, CodeUnexpectedEnd, ErrInvalid, "empty body")
	}
	if b[i] != '{' {
		return nil
	}
	top.object = true
	return eachMember(b, i, func(name []byte, v span) error {
		switch string(name) {
		case "model":
			top.model = v
		case "tools":
			top.tools = v
		case "messages":
			top.messages = v
		case "prompt":
			top.prompt = v
		case "prompt_cache_key":
			if b[v.start] == '"' {
				top.pk = v
			}
		}
		return nil
	})
}

// eachMember calls fn with the raw name and value span of each member of
// the object at b[i] == '{'.
func eachMember(b []byte, i int, fn func(name []byte, v span) error) error {
	i = wsAt(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return structErr(i, "want a member name")
		}
		ke, err := stringEnd(b, i)
		if err != nil {
			return err
		}
		name := b[i+1 : ke-1]
		i = wsAt(b, ke)
		if i >= len(b) || b[i] != ':' {
			return structErr(i, "want ':'")
		}
		vs := wsAt(b, i+1)
		ve, err := valueEnd(b, vs)
		if err != nil {
			return err
		}
		if err := fn(name, span{vs, ve}); err != nil {
			return err
		}
		i = wsAt(b, ve)
		if i >= len(b) {
			return structErr(i, "unterminated object")
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] != ',' {
			return structErr(i, "want ',' or '}'")
		}
		i = wsAt(b, i+1)
	}
}

// eachElement calls fn with the span of each element of the array at
// b[i] == '[' and whether it is the last one.
func eachElement(b []byte, i int, fn func(v span, last bool) (stop bool, err error)) error {
	i = wsAt(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		ve, err := valueEnd(b, i)
		if err != nil {
			return err
		}
		next := wsAt(b, ve)
		if next >= len(b) {
			return structErr(next, "unterminated array")
		}
		last := b[next] == ']'
		if !last && b[next] != ',' {
			return structErr(next, "want ',' or ']'")
		}
		if stop, err := fn(span{i, ve}, last); stop || err != nil || last {
			return err
		}
		i = wsAt(b, next+1)
	}
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

// appendStringValue appends the unescaped text of the string at v.
func appendStringValue(dst, b []byte, v span) ([]byte, error) {
	if b[v.start] != '"' || v.end-v.start < 2 {
		return dst, structErr(v.start, "want a string")
	}
	s := b[v.start+1 : v.end-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := i + 1
			for j < len(s) && s[j] != '\\' {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(s) {
			return dst, structErr(v.start+1+i, "bad escape")
		}
		switch e := s[i+1]; e {
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
			if i+6 > len(s) {
				return dst, structErr(v.start+1+i, "bad escape")
			}
			r := rune(0)
			for _, h := range s[i+2 : i+6] {
				d := unhex(h)
				if d < 0 {
					return dst, structErr(v.start+1+i, "bad escape")
				}
				r = r<<4 | d
			}
			if r >= 0xD800 && r <= 0xDFFF {
				// Canonical bodies hold characters raw; a pair here means the
				// caller skipped canonicalization.
				return dst, structErr(v.start+1+i, "surrogate escape in a canonical body")
			}
			dst = utf8.AppendRune(dst, r)
			i += 6
			continue
		default:
			return dst, structErr(v.start+1+i, "bad escape")
		}
		i += 2
	}
	return dst, nil
}

// appendChatText appends the chat routing text: the tools record, then one
// record per message except the final one (a lone message counts).
func appendChatText(f, b []byte, top topLevel, budget int) ([]byte, error) {
	var err error
	if top.tools.ok() {
		f = append(f, "tools"...)
		f = append(f, unitSep)
		f = append(f, b[top.tools.start:top.tools.end]...)
		f = append(f, recordSep)
	}
	count := 0
	err = eachElement(b, top.messages.start, func(m span, last bool) (bool, error) {
		count++
		if last && count > 1 {
			return true, nil
		}
		var role, content span
		if b[m.start] == '{' {
			if err := eachMember(b, m.start, func(name []byte, v span) error {
				switch string(name) {
				case "role":
					role = v
				case "content":
					content = v
				}
				return nil
			}); err != nil {
				return true, err
			}
		}
		var err error
		if role.ok() && b[role.start] == '"' {
			if f, err = appendStringValue(f, b, role); err != nil {
				return true, err
			}
		}
		f = append(f, unitSep)
		if content.ok() {
			if f, err = appendContent(f, b, content); err != nil {
				return true, err
			}
		}
		f = append(f, recordSep)
		// Past the largest window the rest cannot change any key; the
		// message just written still counts only if it is not the final one,
		// but it is then cut off anyway.
		return len(f) > budget, nil
	})
	return f, err
}

// appendContent appends a message's text: a string as is; for an array of
// parts, text parts by their text and other parts by their canonical JSON,
// joined by '\n'.
func appendContent(f, b []byte, c span) ([]byte, error) {
	switch b[c.start] {
	case '"':
		return appendStringValue(f, b, c)
	case 'n':
		return f, nil
	case '[':
	default:
		return append(f, b[c.start:c.end]...), nil
	}
	first := true
	err := eachElement(b, c.start, func(part span, _ bool) (bool, error) {
		if !first {
			f = append(f, '\n')
		}
		first = false
		var err error
		switch b[part.start] {
		case '"':
			f, err = appendStringValue(f, b, part)
			return false, err
		case '{':
			var typ, text span
			if err := eachMember(b, part.start, func(name []byte, v span) error {
				switch string(name) {
				case "type":
					typ = v
				case "text":
					text = v
				}
				return nil
			}); err != nil {
				return true, err
			}
			if typ.ok() && string(b[typ.start:typ.end]) == `"text"` && text.ok() && b[text.start] == '"' {
				f, err = appendStringValue(f, b, text)
				return false, err
			}
		}
		f = append(f, b[part.start:part.end]...)
		return false, nil
	})
	return f, err
}

// appendPromptText appends the completion routing text: a string prompt as
// is; an array prompt as its elements (strings unescaped, anything else,
// such as token ids, as canonical JSON), each followed by a record
// separator.
func appendPromptText(f, b []byte, p span, budget int) ([]byte, error) {
	switch b[p.start] {
	case '"':
		return appendStringValue(f, b, p)
	case '[':
	default:
		return f, newErr(p.start, CodeSchema, ErrSchema, "prompt must be a string or an array")
	}
	err := eachElement(b, p.start, func(e span, _ bool) (bool, error) {
		var err error
		if b[e.start] == '"' {
			f, err = appendStringValue(f, b, e)
		} else {
			f = append(f, b[e.start:e.end]...)
		}
		f = append(f, recordSep)
		return len(f) > budget, err
	})
	return f, err
}
