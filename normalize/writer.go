package normalize

import "unicode/utf8"

// Writing canonical JSON from values that are not JSON text (a front door
// that builds a request body from an RPC message): the same string form
// and the same validation as a parsed body gets.

// AppendString appends s as a canonical JSON string. It refuses what a
// parsed body may not hold: invalid UTF-8 and Unicode noncharacters.
func AppendString(dst []byte, s string) ([]byte, error) {
	start := len(dst)
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			j := i + 1
			for j < len(s) && s[j] >= 0x20 && s[j] < utf8.RuneSelf && s[j] != '"' && s[j] != '\\' {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return dst[:start], newErr(i, CodeInvalidUTF8, ErrInvalid, "invalid UTF-8 byte 0x%02x", c)
		}
		if isNoncharacter(r) {
			return dst[:start], noncharacterErr(i, r)
		}
		dst = appendEscapedRune(dst, r)
		i += size
	}
	return append(dst, '"'), nil
}

// AppendMembers validates the JSON object src and appends its members in
// canonical form and JCS order, without the braces ("a":1,"b":2), so that
// a caller can merge them into an object it writes. accept is called with
// each member's name first: false leaves the member out, an error stops
// the append.
func AppendMembers(dst, src []byte, opts Options, accept func(name []byte) (bool, error)) ([]byte, error) {
	p := getParser()
	defer putParser(p)
	if err := p.parse(src, opts.withDefaults()); err != nil {
		return dst, err
	}
	root := &p.nodes[0]
	if root.kind != kObject {
		return dst, newErr(int(root.start), CodeSchema, ErrSchema, "want a JSON object")
	}
	start := len(dst)
	for _, k := range p.members[root.m0 : root.m0+root.cnt] {
		keep, err := accept(p.key(k))
		if err != nil {
			return dst[:start], err
		}
		if !keep {
			continue
		}
		if len(dst) > start {
			dst = append(dst, ',')
		}
		dst = p.emitString(dst, k)
		dst = append(dst, ':')
		dst = p.emit(dst, k+1)
	}
	return dst, nil
}
