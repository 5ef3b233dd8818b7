package normalize

// The RouteKey implementation before the single-pass text writer, kept as a
// reference: TestRouteKeyMatchesReference checks the new one against it.

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// refRouteKey computes the routing key of a canonical body, as returned by
// AppendCanonical. It reads the body in one pass and checks its structure,
// but does not validate it: the key of bytes that are not canonical may
// differ from the key of their canonical form.
func refRouteKey(canonical []byte, opts KeyOptions) (RouteInfo, error) {
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
	ks := &refScratch
	// Text past 8N characters cannot change any key; 4 bytes per character
	// bounds how much to collect.
	budget := 4*refSpillCap(n) + 4
	b := canonical
	var (
		model, tools, pk     refSpan
		hasMessages, chatOK  bool
		hasPrompt            bool
		promptErr, chatErr   error
		object               bool
		chatText, promptText = ks.chat[:0], ks.prompt[:0]
		wantChat, wantPrompt = opts.Mode == ModeAuto || opts.Mode == ModeChat, opts.Mode == ModeAuto || opts.Mode == ModeCompletion
	)
	i := skipWS(b, 0)
	if i >= len(b) {
		return RouteInfo{}, newErr(i, CodeUnexpectedEnd, ErrInvalid, "empty body")
	}
	if b[i] == '{' {
		object = true
		i = skipWS(b, i+1)
		for i < len(b) && b[i] != '}' {
			if b[i] != '"' {
				return RouteInfo{}, refStructErr(i, "want a member name")
			}
			ke, err := refStringEnd(b, i)
			if err != nil {
				return RouteInfo{}, err
			}
			name := b[i+1 : ke-1]
			i = skipWS(b, ke)
			if i >= len(b) || b[i] != ':' {
				return RouteInfo{}, refStructErr(i, "want ':'")
			}
			vs := skipWS(b, i+1)
			if vs >= len(b) {
				return RouteInfo{}, refStructErr(vs, "want a value")
			}
			ve := -1
			switch string(name) {
			case "model":
				model = refSpan{vs, vs + 1}
			case "tools":
				tools = refSpan{vs, vs + 1}
			case "prompt_cache_key":
				if b[vs] == '"' {
					pk = refSpan{vs, vs + 1}
				}
			case "messages":
				hasMessages = true
				if wantChat && b[vs] == '[' {
					chatOK = true
					chatText, ve, chatErr = refAppendMessages(chatText, b, vs, budget, &ks.role)
					if chatErr != nil {
						return RouteInfo{}, chatErr
					}
				}
			case "prompt":
				hasPrompt = true
				if wantPrompt {
					promptText, ve, promptErr = refAppendPrompt(promptText, b, vs, budget)
					if promptErr != nil && !refIsSchema(promptErr) {
						return RouteInfo{}, promptErr
					}
				}
			}
			if ve < 0 {
				var err error
				if ve, err = refValueEnd(b, vs); err != nil {
					return RouteInfo{}, err
				}
			}
			if model.start == vs || tools.start == vs || pk.start == vs {
				model.end, tools.end, pk.end = refFixEnd(model, vs, ve), refFixEnd(tools, vs, ve), refFixEnd(pk, vs, ve)
			}
			i = skipWS(b, ve)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				if i < len(b) && b[i] == '}' {
					return RouteInfo{}, refStructErr(i, "trailing comma")
				}
			} else if i >= len(b) || b[i] != '}' {
				return RouteInfo{}, refStructErr(i, "want ',' or '}'")
			}
		}
		if i >= len(b) {
			return RouteInfo{}, refStructErr(i, "unterminated object")
		}
	}
	ks.chat, ks.prompt = chatText, promptText

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
		if f, _, err = refAppendString(f, b, pk.start); err != nil {
			return RouteInfo{}, err
		}
	}
	binary.LittleEndian.PutUint32(f[gstart-4:], uint32(len(f)-gstart))
	// Model.
	mstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	if model.ok() && b[model.start] == '"' {
		if f, _, err = refAppendString(f, b, model.start); err != nil {
			return RouteInfo{}, err
		}
	}
	binary.LittleEndian.PutUint32(f[mstart-4:], uint32(len(f)-mstart))
	// Routing text.
	tstart := len(f) + 4
	f = append(f, 0, 0, 0, 0)
	switch mode {
	case ModeChat:
		if tools.ok() {
			f = append(f, "tools"...)
			f = append(f, unitSep)
			f = append(f, b[tools.start:tools.end]...)
			f = append(f, recordSep)
		}
		f = append(f, chatText...)
	case ModeCompletion:
		f = append(f, promptText...)
	default:
		f = append(f, b[:min(len(b), refSpillCap(n)+1)]...)
	}
	ks.frame = f
	if opts.Group != "" {
		ri.Group = opts.Group
	} else {
		ri.Group = string(f[gstart : mstart-4])
	}
	ri.Model = string(f[mstart : tstart-4])

	text := f[tstart:]
	var cur refCharCursor
	cur.bytes = mode == ModeNative
	end, longer := cur.cut(text, n)
	ri.RoutingTextLen = cur.count
	ri.Key = refHashFrame(f, tstart, end)
	if longer {
		ri.SpillKeys = make([]uint64, 0, spillWindows)
	}
	for w := n; longer && len(ri.SpillKeys) < spillWindows; {
		w *= 2
		end, longer = cur.cut(text, w)
		ri.SpillKeys = append(ri.SpillKeys, refHashFrame(f, tstart, end))
	}
	return ri, nil
}

func refFixEnd(s refSpan, vs, ve int) int {
	if s.start == vs {
		return ve
	}
	return s.end
}

func refIsSchema(err error) bool {
	se, ok := err.(*SyntaxError)
	return ok && se.code == CodeSchema
}

func refSpillCap(n int) int { return n << spillWindows }

func refHashFrame(f []byte, tstart, end int) uint64 {
	binary.LittleEndian.PutUint32(f[tstart-4:], uint32(end))
	return xxh3.Hash(f[:tstart+end])
}

// refCharCursor cuts a text at growing character (or byte) counts without
// rescanning what it has already counted.
type refCharCursor struct {
	bytes bool
	i     int // byte offset reached
	count int // characters before i
}

// cut returns the byte length of the first n characters and whether the
// text is longer than that; count is left at min(n, characters in text).
func (c *refCharCursor) cut(text []byte, n int) (int, bool) {
	if c.bytes {
		if len(text) > n {
			c.count = n
			return n, true
		}
		c.count = len(text)
		return len(text), false
	}
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
				c.i, c.count = i, count
				return i, true
			}
			count++
		}
	}
	c.i, c.count = i, count
	return len(text), false
}

func refStructErr(i int, what string) error {
	return newErr(i, CodeInvalidCharacter, ErrInvalid, "malformed canonical body: %s", what)
}

// refStringEnd returns the index after the closing quote of the string at b[i].
func refStringEnd(b []byte, i int) (int, error) {
	j := i + 1
	for {
		for j+8 <= len(b) && refQuoteFreeWord(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		if j >= len(b) {
			return j, refStructErr(i, "unterminated string")
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

func refQuoteFreeWord(v uint64) bool {
	q := v ^ (lsb * '"')
	q = (q - lsb) & ^q
	bs := v ^ (lsb * '\\')
	bs = (bs - lsb) & ^bs
	return (q|bs)&msb == 0
}

// refValueEnd returns the index after the value starting at b[i].
func refValueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, refStructErr(i, "want a value")
	}
	switch b[i] {
	case '"':
		return refStringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				e, err := refStringEnd(b, j)
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
		return len(b), refStructErr(i, "unterminated container")
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
			if j == i {
				return j, refStructErr(i, "want a value")
			}
			return j, nil
		}
		j++
	}
	return j, nil
}

// refAppendString appends the unescaped text of the string at b[i] == '"' and
// returns the index after it, in one pass.
func refAppendString(dst, b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return dst, i, refStructErr(i, "want a string")
	}
	j := i + 1
	for {
		run := j
		for j+8 <= len(b) && refQuoteFreeWord(binary.LittleEndian.Uint64(b[j:])) {
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
			return dst, j, refStructErr(i, "unterminated string")
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
				return dst, j, refStructErr(j, "bad escape")
			}
			r := rune(0)
			for _, h := range b[j+2 : j+6] {
				d := unhex(h)
				if d < 0 {
					return dst, j, refStructErr(j, "bad escape")
				}
				r = r<<4 | d
			}
			if r >= 0xD800 && r <= 0xDFFF {
				// Canonical bodies hold characters raw; a surrogate escape
				// means the caller skipped canonicalization.
				return dst, j, refStructErr(j, "surrogate escape in a canonical body")
			}
			dst = utf8.AppendRune(dst, r)
			j += 6
			continue
		default:
			return dst, j, refStructErr(j, "bad escape")
		}
		j += 2
	}
}

// refAppendMessages appends the chat routing records of the messages array at
// b[i] == '[': every message but the final one (a lone message counts).
// It returns the index after the array.
func refAppendMessages(dst, b []byte, i, budget int, role *[]byte) ([]byte, int, error) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return dst, i + 1, nil
	}
	count := 0
	full := false
	for {
		if i >= len(b) {
			return dst, i, refStructErr(i, "unterminated array")
		}
		count++
		start := len(dst)
		var end int
		var err error
		if full {
			end, err = refValueEnd(b, i)
		} else {
			dst, end, err = refAppendMessage(dst, b, i, role)
		}
		if err != nil {
			return dst, end, err
		}
		next := skipWS(b, end)
		if next >= len(b) || (b[next] != ',' && b[next] != ']') {
			return dst, next, refStructErr(next, "want ',' or ']'")
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

// refAppendMessage appends "role US text RS" for the message at b[i]. Canonical
// order puts content before role, so the text is written first and the role
// moved in front of it.
func refAppendMessage(dst, b []byte, i int, role *[]byte) ([]byte, int, error) {
	start := len(dst)
	r := (*role)[:0]
	if b[i] != '{' {
		end, err := refValueEnd(b, i)
		return append(dst, unitSep, recordSep), end, err
	}
	end, err := refEachMemberAt(b, i, func(name []byte, vs int) (int, error) {
		var ve int
		var err error
		switch string(name) {
		case "role":
			if b[vs] == '"' {
				r, ve, err = refAppendString(r[:0], b, vs)
				return ve, err
			}
		case "content":
			dst, ve, err = refAppendContent(dst, b, vs)
			return ve, err
		}
		return refValueEnd(b, vs)
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

// refEachMemberAt walks the object at b[i] == '{'; fn reads the value at vs and
// returns the index after it. It returns the index after the object.
func refEachMemberAt(b []byte, i int, fn func(name []byte, vs int) (int, error)) (int, error) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, refStructErr(i, "want a member name")
		}
		ke, err := refStringEnd(b, i)
		if err != nil {
			return ke, err
		}
		name := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return i, refStructErr(i, "want ':'")
		}
		vs := skipWS(b, i+1)
		if vs >= len(b) {
			return vs, refStructErr(vs, "want a value")
		}
		ve, err := fn(name, vs)
		if err != nil {
			return ve, err
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return i, refStructErr(i, "unterminated object")
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, refStructErr(i, "want ',' or '}'")
		}
		i = skipWS(b, i+1)
	}
}

// refAppendContent appends a message's text: a string as is; for an array of
// parts, text parts by their text and other parts by their canonical JSON,
// joined by '\n'; nothing for null.
func refAppendContent(dst, b []byte, i int) ([]byte, int, error) {
	switch b[i] {
	case '"':
		return refAppendString(dst, b, i)
	case '[':
	default:
		end, err := refValueEnd(b, i)
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
			dst, end, err = refAppendString(dst, b, i)
		case i < len(b) && b[i] == '{':
			isText, hasText := false, false
			end, err = refEachMemberAt(b, i, func(name []byte, vs int) (int, error) {
				switch string(name) {
				case "text":
					if b[vs] == '"' {
						hasText = true
						var ve int
						var err error
						dst, ve, err = refAppendString(dst, b, vs)
						return ve, err
					}
				case "type":
					ve, err := refValueEnd(b, vs)
					isText = string(b[vs:ve]) == `"text"`
					return ve, err
				}
				return refValueEnd(b, vs)
			})
			if err == nil && !(isText && hasText) {
				dst = append(dst[:start], b[i:end]...)
			}
		default:
			end, err = refValueEnd(b, i)
			if err == nil {
				dst = append(dst, b[i:end]...)
			}
		}
		if err != nil {
			return dst, end, err
		}
		next := skipWS(b, end)
		if next >= len(b) || (b[next] != ',' && b[next] != ']') {
			return dst, next, refStructErr(next, "want ',' or ']'")
		}
		if b[next] == ']' {
			return dst, next + 1, nil
		}
		i = skipWS(b, next+1)
	}
}

// refAppendPrompt appends the completion routing text of the prompt at b[i]:
// a string as is; an array as its elements (strings unescaped, anything
// else as canonical JSON), each followed by RS. It returns the index after
// the prompt; a prompt of another type gives a schema error.
func refAppendPrompt(dst, b []byte, i, budget int) ([]byte, int, error) {
	switch b[i] {
	case '"':
		return refAppendString(dst, b, i)
	case '[':
	default:
		end, err := refValueEnd(b, i)
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
			end, err = refValueEnd(b, i)
		case i < len(b) && b[i] == '"':
			dst, end, err = refAppendString(dst, b, i)
			dst = append(dst, recordSep)
		default:
			end, err = refValueEnd(b, i)
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
			return dst, next, refStructErr(next, "want ',' or ']'")
		}
		if b[next] == ']' {
			return dst, next + 1, nil
		}
		i = skipWS(b, next+1)
	}
}

type refSpan struct{ start, end int }

func (s refSpan) ok() bool { return s.end > s.start }

type refKeyScratch struct{ frame, chat, prompt, role []byte }

// refScratch is reused so benchmarks compare like with like (tests are serial).
var refScratch refKeyScratch
