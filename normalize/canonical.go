package normalize

import "bytes"

// Canonicalize returns the canonical form of src with default options and
// the auto-detected schema.
func Canonicalize(src []byte) ([]byte, error) {
	out, _, err := AppendCanonical(make([]byte, 0, len(src)), src, Options{})
	return out, err
}

// AppendCanonical validates src and appends its canonical form to dst. It
// returns the schema used for the top-level member order: opts.Mode, or the
// detected schema when opts.Mode is ModeAuto (ModeAuto again when no known
// schema matched; the body is then in plain JCS order). On error dst is
// returned unchanged. With a reused dst of enough capacity it does not
// allocate.
func AppendCanonical(dst, src []byte, opts Options) ([]byte, Mode, error) {
	p := getParser()
	defer putParser(p)
	return p.canonical(dst, src, opts)
}

func (p *parser) canonical(dst, src []byte, opts Options) ([]byte, Mode, error) {
	mode, err := p.parseSchema(src, opts)
	if err != nil {
		return dst, opts.Mode, err
	}
	return p.emitRoot(dst, mode, nil), mode, nil
}

// parseSchema validates src and resolves its schema.
func (p *parser) parseSchema(src []byte, opts Options) (Mode, error) {
	if err := p.parse(src, opts.withDefaults()); err != nil {
		return opts.Mode, err
	}
	return p.schema(opts.Mode)
}

// emitRoot appends the canonical form of the parsed document. With salt
// set, the root (an object) gets a top-level "cache_salt" member of that
// string value, in place of any it had, at the position canonical order
// gives that member.
func (p *parser) emitRoot(dst []byte, mode Mode, salt []byte) []byte {
	root := &p.nodes[0]
	if root.kind != kObject || (mode == ModeAuto && salt == nil) {
		return p.emit(dst, 0)
	}
	// Top level of a known schema: members by (group, rank), stable over the
	// JCS order they are already sorted in (plain JCS order without one).
	ms := p.members[root.m0 : root.m0+root.cnt]
	// Ranks are computed once per member; a top level has few members, so
	// an insertion sort on (rank, JCS position) is enough.
	order := append(p.order[:0], ms...)
	ranks := p.ranks[:0]
	for _, k := range order {
		ranks = append(ranks, int32(p.rank(mode, p.key(k))))
	}
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && ranks[j] < ranks[j-1]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
			ranks[j], ranks[j-1] = ranks[j-1], ranks[j]
		}
	}
	p.ranks = ranks
	p.order = order
	saltRank := int32(p.rank(mode, []byte(cacheSalt)))
	saltDone := salt == nil
	dst = append(dst, '{')
	first := true
	for i, k := range order {
		name := p.key(k)
		if !saltDone && (ranks[i] > saltRank || (ranks[i] == saltRank && compareUTF16(name, []byte(cacheSalt)) >= 0)) {
			dst = appendSalt(dst, salt, first)
			first, saltDone = false, true
			if string(name) == cacheSalt {
				continue
			}
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = p.emitString(dst, k)
		dst = append(dst, ':')
		dst = p.emit(dst, k+1)
	}
	if !saltDone {
		dst = appendSalt(dst, salt, first)
	}
	return append(dst, '}')
}

const cacheSalt = "cache_salt"

// rank is a top-level member's rank: by schema, all equal without one
// (plain JCS order).
func (p *parser) rank(m Mode, name []byte) int {
	if m == ModeAuto {
		return 0
	}
	return memberRank(m, name)
}

func appendSalt(dst, salt []byte, first bool) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, `"cache_salt":"`...)
	for _, r := range string(salt) {
		dst = appendEscapedRune(dst, r)
	}
	return append(dst, '"')
}

// schema resolves the mode against the parsed root.
func (p *parser) schema(m Mode) (Mode, error) {
	root := &p.nodes[0]
	if root.kind != kObject {
		if m != ModeAuto && m != ModeNative {
			return m, newErr(int(root.start), CodeSchema, ErrSchema, "a %s request must be a JSON object", m)
		}
		return m, nil
	}
	if m != ModeAuto {
		return m, nil
	}
	var has promptMembers
	for _, k := range p.members[root.m0 : root.m0+root.cnt] {
		has.note(p.key(k))
	}
	return has.detect(func() bool { return p.itemsInput(p.member(0, "input")) }), nil
}

// itemsInput reports whether the input node v holds Responses items: a
// string, or a non-empty array of objects. Any other input (token ids,
// an array of strings) is a pooling input.
func (p *parser) itemsInput(v int32) bool {
	n := &p.nodes[v]
	switch n.kind {
	case kString:
		return true
	case kArray:
		if n.next == v+1 {
			return false
		}
		for e := v + 1; e < n.next; e = p.nodes[e].next {
			if p.nodes[e].kind != kObject {
				return false
			}
		}
		return true
	}
	return false
}

// Top-level member lists. Prompt-defining members come first in the order
// the engine renders them; volatile metadata goes last; every other member
// is a generation parameter in between, in JCS order. docs/normalize.md
// lists the same.
var (
	chatPrompt       = []string{"model", "chat_template", "chat_template_kwargs", "tools", "documents", "messages", "add_generation_prompt", "continue_final_message"}
	completionPrompt = []string{"model", "prompt", "suffix"}
	nativePrompt     = []string{"inputs", "parameters"}
	responsesPrompt  = []string{"model", "instructions", "tools", "input", "previous_response_id"}
	messagesPrompt   = []string{"model", "system", "tools", "messages"}
	poolingPrompt    = []string{"model", "query", "text_1", "input", "messages", "documents", "text_2"}
	volatileMembers  = []string{"user", "metadata", "stream", "stream_options", "store", "prompt_cache_key", "safety_identifier", "request_id", "service_tier", "priority", "kv_transfer_params"}
	// Volatile in one schema only: a Responses request's "background" (run
	// it detached) and a Messages request's top-level "cache_control".
	responsesVolatile = "background"
	messagesVolatile  = "cache_control"
)

const (
	rankParam    = 1000
	rankVolatile = 2000
)

func memberRank(m Mode, name []byte) int {
	var prompt []string
	switch m {
	case ModeChat:
		prompt = chatPrompt
	case ModeCompletion:
		prompt = completionPrompt
	case ModeNative:
		prompt = nativePrompt
	case ModeResponses:
		prompt = responsesPrompt
	case ModeMessages:
		prompt = messagesPrompt
	case ModePooling:
		prompt = poolingPrompt
	}
	for i, n := range prompt {
		if len(name) == len(n) && string(name) == n {
			return i
		}
	}
	if isVolatile(name) || (m == ModeResponses && string(name) == responsesVolatile) || (m == ModeMessages && string(name) == messagesVolatile) {
		return rankVolatile
	}
	return rankParam
}

func isVolatile(name []byte) bool {
	for _, n := range volatileMembers {
		if len(name) == len(n) && string(name) == n {
			return true
		}
	}
	return false
}

func (p *parser) emit(dst []byte, i int32) []byte {
	n := &p.nodes[i]
	switch n.kind {
	case kObject:
		dst = append(dst, '{')
		for j, k := range p.members[n.m0 : n.m0+n.cnt] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = p.emitString(dst, k)
			dst = append(dst, ':')
			dst = p.emit(dst, k+1)
		}
		return append(dst, '}')
	case kArray:
		dst = append(dst, '[')
		end := n.next
		for c := i + 1; c < end; c = p.nodes[c].next {
			if c > i+1 {
				dst = append(dst, ',')
			}
			dst = p.emit(dst, c)
		}
		return append(dst, ']')
	case kString:
		return p.emitString(dst, i)
	case kNumber:
		return p.appendNumber(dst, p.src[n.start:n.end], n.num)
	case kTrue:
		return append(dst, "true"...)
	case kFalse:
		return append(dst, "false"...)
	default:
		return append(dst, "null"...)
	}
}

func (p *parser) emitString(dst []byte, i int32) []byte {
	n := &p.nodes[i]
	dst = append(dst, '"')
	if !n.fix {
		dst = append(dst, p.src[n.start:n.end]...)
	} else {
		dst = appendCanonicalEscapes(dst, p.src[n.start:n.end])
	}
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendCanonicalEscapes rewrites the body of a validated string that has
// escapes into RFC 8785 form: raw UTF-8 except '"', '\\' and control
// characters.
func appendCanonicalEscapes(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				return append(dst, s[i:]...)
			}
			dst = append(dst, s[i:i+j]...)
			i += j
			continue
		}
		var r rune
		switch e := s[i+1]; e {
		case 'u':
			r = hexVal(s[i+2 : i+6])
			if r >= 0xD800 && r <= 0xDBFF {
				lo := hexVal(s[i+8 : i+12])
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			}
			i += 6
		case 'b':
			r, i = '\b', i+2
		case 'f':
			r, i = '\f', i+2
		case 'n':
			r, i = '\n', i+2
		case 'r':
			r, i = '\r', i+2
		case 't':
			r, i = '\t', i+2
		default: // '"', '\\', '/'
			r, i = rune(e), i+2
		}
		dst = appendEscapedRune(dst, r)
	}
	return dst
}

func appendEscapedRune(dst []byte, r rune) []byte {
	switch {
	case r == '"' || r == '\\':
		return append(dst, '\\', byte(r))
	case r >= 0x20:
		if r < 0x80 {
			return append(dst, byte(r))
		}
		return appendRune(dst, r)
	case r == '\b':
		return append(dst, '\\', 'b')
	case r == '\f':
		return append(dst, '\\', 'f')
	case r == '\n':
		return append(dst, '\\', 'n')
	case r == '\r':
		return append(dst, '\\', 'r')
	case r == '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
}
