package normalize

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Default limits; Options fields left at zero take these.
const (
	DefaultMaxBodyBytes   = 8 << 20
	DefaultMaxDepth       = 128
	DefaultMaxStringBytes = 4 << 20
)

// Options controls canonicalization. Zero values take the defaults.
type Options struct {
	// Mode is the request schema; ModeAuto detects it.
	Mode Mode
	// MaxBodyBytes limits the input size (default 8 MiB).
	MaxBodyBytes int
	// MaxDepth limits nesting of arrays and objects (default 128).
	MaxDepth int
	// MaxStringBytes limits each string's (and number literal's) length in
	// input bytes, escapes included (default 4 MiB).
	MaxStringBytes int
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxStringBytes <= 0 {
		o.MaxStringBytes = DefaultMaxStringBytes
	}
	return o
}

type kind uint8

const (
	kNull kind = iota
	kFalse
	kTrue
	kNumber
	kString
	kArray
	kObject
)

// node is one value of the parsed document, stored flat in document order.
// A container's children follow it; next is the index after its subtree.
type node struct {
	kind kind
	esc  bool // string: contains a backslash escape
	num  bool // number: has a fraction or exponent
	// fix: a string has an escape that canonical form writes otherwise
	// (canonicalEscape); without one its bytes are already canonical.
	fix bool
	// start, end: byte range in src. Strings: between the quotes. Numbers:
	// the literal. Containers: offset of the opening bracket.
	start, end int32
	next       int32
	// Objects: sorted member keys at members[m0:m0+cnt].
	// Escaped strings that are keys, and all escaped strings when the
	// parser decodes text: the unescaped text at keybuf[m0:m0+cnt]. An
	// escape decodes to at least one byte, so cnt > 0 says the text is
	// there (decoded) without a flag that would make a node 28 bytes.
	m0, cnt int32
}

// decoded reports whether string node n has its unescaped text in keybuf.
func (n *node) decoded() bool { return n.esc && n.cnt > 0 }

// parser validates a document and records its structure; it is pooled so the
// append path does not allocate per request.
type parser struct {
	src     []byte
	opt     Options
	nodes   []node
	members []int32
	mstack  []int32
	keybuf  []byte
	digits  []byte
	order   []int32
	ranks   []int32
	// comparisons counts member-name comparisons since the last reset.
	comparisons int
	// nonASCII says that some string of the document (a key or a value)
	// holds a character from U+0080 up, raw or escaped. Without one, every
	// text read off the document (and the canonical JSON of its values) is
	// ASCII, so the routing text's characters are its bytes and nothing
	// needs counting.
	nonASCII bool
	// cmpMembers is compareMembers bound once, so sorting allocates no
	// method value per object.
	cmpMembers func(a, b int32) int
	// rec, when set (LayOutRoutingText), collects the routing text's
	// segments as the key's layout code writes it; nil on the key's path.
	rec *[]Segment
	// decodeText makes the parse write the unescaped text of every
	// escaped string, not only of keys, while it scans the string: the
	// routing text is made of them, and unescaping after the parse would
	// read each string a second time. Set by callers that read the text;
	// putParser clears it.
	decodeText bool
}

var parserPool = sync.Pool{New: func() any { return newParser() }}

func newParser() *parser {
	p := new(parser)
	p.cmpMembers = p.compareMembers
	return p
}

func getParser() *parser { return parserPool.Get().(*parser) }

func putParser(p *parser) {
	// Do not keep the scratch of a rare huge body alive forever.
	if cap(p.nodes) > 1<<20 || cap(p.keybuf) > 1<<22 {
		return
	}
	p.src = nil
	p.decodeText = false
	parserPool.Put(p)
}

func (p *parser) reset(src []byte, opt Options) {
	p.src = src
	p.opt = opt
	p.nodes = p.nodes[:0]
	p.members = p.members[:0]
	p.mstack = p.mstack[:0]
	p.keybuf = p.keybuf[:0]
	p.comparisons = 0
	p.nonASCII = false
}

// Validate reports whether src is a single valid I-JSON value within the
// limits of opts. It returns a *SyntaxError on failure. Mode is ignored.
func Validate(src []byte, opts Options) error {
	p := getParser()
	defer putParser(p)
	return p.parse(src, opts.withDefaults())
}

func (p *parser) parse(src []byte, opt Options) error {
	p.reset(src, opt)
	if len(src) > opt.MaxBodyBytes {
		return newErr(opt.MaxBodyBytes, CodeSizeLimit, ErrTooLarge, "body of %d bytes is over the limit of %d bytes", len(src), opt.MaxBodyBytes)
	}
	if len(src) > 1<<31-1 {
		return newErr(0, CodeSizeLimit, ErrTooLarge, "body over 2 GiB")
	}
	i := skipWS(src, 0)
	i, err := p.value(i, 0)
	if err != nil {
		return err
	}
	i = skipWS(src, i)
	if i < len(src) {
		return newErr(i, CodeTrailingData, ErrInvalid, "unexpected data after the top-level value: %s", describe(src[i]))
	}
	return nil
}

func skipWS(s []byte, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func describe(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	return "byte 0x" + strconv.FormatUint(uint64(c), 16)
}

func (p *parser) unexpected(i int, want string) error {
	s := p.src
	if i >= len(s) {
		return newErr(i, CodeUnexpectedEnd, ErrInvalid, "unexpected end of input, want %s", want)
	}
	c := s[i]
	switch {
	case c == '/':
		return newErr(i, CodeComment, ErrInvalid, "comments are not allowed")
	case c == '\'':
		return newErr(i, CodeSingleQuote, ErrInvalid, "single-quoted strings are not allowed")
	case c >= 0x80:
		return newErr(i, CodeInvalidCharacter, ErrInvalid, "unexpected non-ASCII %s, want %s", describe(c), want)
	}
	return newErr(i, CodeInvalidCharacter, ErrInvalid, "unexpected %s, want %s", describe(c), want)
}

func (p *parser) value(i, depth int) (int, error) {
	s := p.src
	if i >= len(s) {
		return i, p.unexpected(i, "a value")
	}
	switch c := s[i]; {
	case c == '{':
		return p.object(i, depth+1)
	case c == '[':
		return p.array(i, depth+1)
	case c == '"':
		return p.str(i, false)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(i)
	case c == 't':
		return p.literal(i, "true", kTrue)
	case c == 'f':
		return p.literal(i, "false", kFalse)
	case c == 'n':
		return p.literal(i, "null", kNull)
	case c == 'N' || c == 'I':
		return i, newErr(i, CodeInvalidLiteral, ErrInvalid, "NaN and Infinity are not JSON numbers")
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return i, newErr(i, CodeInvalidLiteral, ErrInvalid, "unknown literal starting with %s (want true, false or null)", describe(c))
	case c == '+' || c == '.':
		return i, newErr(i, CodeInvalidNumber, ErrInvalid, "a number must start with '-' or a digit")
	default:
		return i, p.unexpected(i, "a value")
	}
}

func (p *parser) literal(i int, word string, k kind) (int, error) {
	s := p.src
	for j := 0; j < len(word); j++ {
		if i+j >= len(s) {
			return i + j, newErr(i+j, CodeUnexpectedEnd, ErrInvalid, "unexpected end of input in literal %s", word)
		}
		if s[i+j] != word[j] {
			return i, newErr(i, CodeInvalidLiteral, ErrInvalid, "invalid literal, want %s", word)
		}
	}
	end := i + len(word)
	// "nullx" or "true1": a literal must be followed by a delimiter.
	if end < len(s) && isIdentByte(s[end]) {
		return i, newErr(i, CodeInvalidLiteral, ErrInvalid, "invalid literal, want %s", word)
	}
	p.nodes = append(p.nodes, node{kind: k, start: int32(i), end: int32(end), next: int32(len(p.nodes) + 1)})
	return end, nil
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func (p *parser) array(i, depth int) (int, error) {
	if depth > p.opt.MaxDepth {
		return i, newErr(i, CodeDepthLimit, ErrTooDeep, "nesting deeper than %d", p.opt.MaxDepth)
	}
	s := p.src
	idx := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: kArray, start: int32(i)})
	i = skipWS(s, i+1)
	if i < len(s) && s[i] == ']' {
		p.nodes[idx].next = int32(len(p.nodes))
		return i + 1, nil
	}
	for {
		var err error
		if i < len(s) && s[i] == ']' {
			return i, newErr(i, CodeTrailingComma, ErrInvalid, "trailing comma in array")
		}
		if i, err = p.value(i, depth); err != nil {
			return i, err
		}
		p.nodes[idx].cnt++
		i = skipWS(s, i)
		if i >= len(s) {
			return i, p.unexpected(i, "',' or ']'")
		}
		if s[i] == ',' {
			i = skipWS(s, i+1)
			continue
		}
		if s[i] == ']' {
			p.nodes[idx].next = int32(len(p.nodes))
			return i + 1, nil
		}
		return i, p.unexpected(i, "',' or ']'")
	}
}

func (p *parser) object(i, depth int) (int, error) {
	if depth > p.opt.MaxDepth {
		return i, newErr(i, CodeDepthLimit, ErrTooDeep, "nesting deeper than %d", p.opt.MaxDepth)
	}
	s := p.src
	idx := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: kObject, start: int32(i)})
	i = skipWS(s, i+1)
	base := len(p.mstack)
	if i < len(s) && s[i] == '}' {
		p.nodes[idx].m0 = int32(len(p.members))
		p.nodes[idx].next = int32(len(p.nodes))
		return i + 1, nil
	}
	for {
		var err error
		if i >= len(s) || s[i] != '"' {
			if i < len(s) && s[i] == '}' && len(p.mstack) > base {
				return i, newErr(i, CodeTrailingComma, ErrInvalid, "trailing comma in object")
			}
			return i, p.unexpected(i, "a member name string")
		}
		k := len(p.nodes)
		if i, err = p.str(i, true); err != nil {
			return i, err
		}
		i = skipWS(s, i)
		if i >= len(s) || s[i] != ':' {
			return i, p.unexpected(i, "':' after member name")
		}
		i = skipWS(s, i+1)
		if i, err = p.value(i, depth); err != nil {
			return i, err
		}
		p.mstack = append(p.mstack, int32(k))
		i = skipWS(s, i)
		if i >= len(s) {
			return i, p.unexpected(i, "',' or '}'")
		}
		if s[i] == ',' {
			i = skipWS(s, i+1)
			continue
		}
		if s[i] == '}' {
			break
		}
		return i, p.unexpected(i, "',' or '}'")
	}
	ms := p.mstack[base:]
	p.sortMembers(ms)
	if err := p.checkDuplicates(ms); err != nil {
		return i, err
	}
	n := &p.nodes[idx]
	n.m0 = int32(len(p.members))
	n.cnt = int32(len(ms))
	n.next = int32(len(p.nodes))
	p.members = append(p.members, ms...)
	p.mstack = p.mstack[:base]
	return i + 1, nil
}

// key returns the unescaped member name of key node k.
func (p *parser) key(k int32) []byte {
	n := &p.nodes[k]
	if n.esc {
		return p.keybuf[n.m0 : n.m0+n.cnt]
	}
	return p.src[n.start:n.end]
}

// compareMembers orders keys by UTF-16 code units, ties by position, so
// the order is total and duplicates end up adjacent in source order. It
// counts its calls so that tests can show no member order is slow.
func (p *parser) compareMembers(a, b int32) int {
	p.comparisons++
	if c := compareUTF16(p.key(a), p.key(b)); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// sortMembers sorts an object's member keys. Member names come from the
// request, so the order they arrive in is attacker-chosen: the sort must be
// O(n log n) for every order, which pattern-defeating quicksort (with its
// heapsort fallback) guarantees and a plain median-of-three quicksort does
// not (a crafted order made 80,000 members take seconds).
func (p *parser) sortMembers(ms []int32) {
	if len(ms) < 2 {
		return
	}
	slices.SortFunc(ms, p.cmpMembers)
}

func (p *parser) checkDuplicates(ms []int32) error {
	dup := int32(-1)
	for i := 1; i < len(ms); i++ {
		if string(p.key(ms[i])) == string(p.key(ms[i-1])) {
			if dup < 0 || ms[i] < dup {
				dup = ms[i]
			}
		}
	}
	if dup < 0 {
		return nil
	}
	n := p.nodes[dup]
	return newErr(int(n.start)-1, CodeDuplicateMember, ErrInvalid, "duplicate member name %s", quoteShort(p.key(dup)))
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 orders member names. Byte order equals code point order, which
// differs from UTF-16 order only between a supplementary character (a
// surrogate pair, D800..DFFF) and a BMP character at or above U+E000.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		switch {
		case len(a) < len(b):
			return -1
		case len(a) > len(b):
			return 1
		}
		return 0
	}
	// Back up to the start of the differing character.
	for i > 0 && a[i]&0xC0 == 0x80 {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return cmpInt(utf16Unit(ra, rb), utf16Unit(rb, ra))
}

// utf16Unit returns the value that decides r's order against other: r
// itself, or its high surrogate when only r is supplementary.
func utf16Unit(r, other rune) rune {
	if r >= 0x10000 && other < 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

func cmpInt(a, b rune) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// attention returns, in the high bit of each byte, the bytes of v a
// string cannot hold without a closer look: control bytes, '"', '\\' and
// bytes from 0x80 up. Only the lowest flag is exact (a flagged byte may
// carry a false flag into the bytes above it, never hide one below), and
// that is the one the scans read: its byte is the first that needs a look.
func attention(v uint64) uint64 {
	// Flipping bit 1 maps '"' (0x22) to 0x20 and keeps 0x00-0x1f in
	// place, so one "below 0x21" test finds control bytes and quotes.
	// Bytes from 0x80 up are caught by v itself.
	w := v ^ (lsb * 0x02)
	ctlq := (w - lsb*0x21) & ^w
	bs := v ^ (lsb * '\\')
	bs = (bs - lsb) & ^bs
	return (ctlq | bs | v) & msb
}

// plainWord reports whether the 8 bytes of v are all printable ASCII other
// than '"' and '\\': the bytes a string can hold without a closer look.
func plainWord(v uint64) bool { return attention(v) == 0 }

// backslashes returns, in the high bit of each byte, the backslashes of v;
// as in attention, only the lowest flag is exact.
func backslashes(v uint64) uint64 {
	bs := v ^ (lsb * '\\')
	return (bs - lsb) & ^bs & msb
}

// plainRun returns the index of the first byte at or after i that a string
// cannot hold without a closer look (see attention), or len(s): sixteen
// bytes per compare (plainChunks) while sixteen are left, then words. No
// run costs a byte-by-byte loop, not even the bytes before an escape.
func plainRun(s []byte, i int) int {
	if len(s)-i >= 16 {
		return i + plainChunks(s[i:])
	}
	for i+8 <= len(s) {
		if m := attention(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\' {
		i++
	}
	return i
}

// str validates a string starting at the quote at i; key strings get their
// unescaped name stored when they contain escapes.
//
// It is one loop over locals, kept in one function because it is the
// parser's hottest path. With decoding on, the text is written to keybuf
// from the first escape on: the plain run before each escape is copied
// when the escape is found, then the escape's character; copied is where
// the next run starts. keybuf is held in a local (kb): an escape every line
// of prose appends to it, and the field would be written back each time.
// wide records a character from U+0080 up, raw or escaped
// (parser.nonASCII). Each round scans one word without a call: in prose
// with non-ASCII words or an escape every few words most runs end within
// it, and after an escape the next byte is often another one; only a run
// that outlasts the word is worth a call of the longer scans. The
// two-character escapes canonical form keeps are taken in the loop, with
// no more checks: prose has one every line.
func (p *parser) str(i int, isKey bool) (int, error) {
	s := p.src
	open, start := i, i+1
	i = start
	esc, fix, wide := false, false, false
	decode := isKey || p.decodeText
	k0, copied := 0, start
	kb := p.keybuf
	for {
		if i+8 <= len(s) {
			if m := attention(binary.LittleEndian.Uint64(s[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
			} else {
				i = plainRun(s, i+8)
			}
		} else if i < len(s) && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\' {
			i = plainRun(s, i)
		}
		if i >= len(s) {
			return i, newErr(i, CodeUnexpectedEnd, ErrInvalid, "unexpected end of input in string starting at offset %d", open)
		}
		c := s[i]
		switch {
		case c == '"':
			goto done
		case c == '\\':
			if !esc {
				esc = true
				k0 = len(kb)
			}
			if i+1 < len(s) {
				if d := shortEscape[s[i+1]]; d != 0 {
					if decode {
						kb = append(append(kb, s[copied:i]...), d)
						copied = i + 2
					}
					i += 2
					continue
				}
			}
			n, r, err := p.escape(i)
			if err != nil {
				return i, err
			}
			if !fix && !canonicalEscape(s[i:i+n]) {
				fix = true
			}
			if decode {
				kb = utf8.AppendRune(append(kb, s[copied:i]...), r)
				copied = i + n
			}
			wide = wide || r >= utf8.RuneSelf
			i += n
		case c < 0x20:
			return i, newErr(i, CodeControlCharacter, ErrInvalid, "unescaped control character %s in string", describe(c))
		default: // from 0x80 up: plainRun stops at nothing else
			size := utf8Len(s[i:])
			if size == 0 || size >= 3 && rawNoncharacter(s[i:i+size]) {
				return i, rawCharErr(s, i, size)
			}
			wide = true
			i += size
		}
	}
done:
	if i-start > p.opt.MaxStringBytes {
		return i, newErr(open, CodeStringLimit, ErrTooLong, "string of %d bytes is over the limit of %d bytes", i-start, p.opt.MaxStringBytes)
	}
	if wide {
		p.nonASCII = true
	}
	nd := node{kind: kString, esc: esc, fix: fix, start: int32(start), end: int32(i), next: int32(len(p.nodes) + 1)}
	if esc && decode {
		kb = append(kb, s[copied:i]...)
		nd.m0, nd.cnt = int32(k0), int32(len(kb)-k0)
		p.keybuf = kb
	}
	p.nodes = append(p.nodes, nd)
	return i + 1, nil
}

// rawCharErr reports the character from 0x80 up at s[i] that str stopped
// at: invalid UTF-8 (size 0) or a noncharacter.
func rawCharErr(s []byte, i, size int) error {
	if size == 0 {
		return newErr(i, CodeInvalidUTF8, ErrInvalid, "invalid UTF-8 %s in string", describe(s[i]))
	}
	r, _ := utf8.DecodeRune(s[i:])
	return noncharacterErr(i, r)
}

// shortEscape maps the character after a backslash to the byte it stands
// for, for the two-character escapes canonical form writes as they are
// (all but \/); zero for the others.
var shortEscape = [256]byte{'"': '"', '\\': '\\', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// canonicalEscape reports whether the valid escape sequence esc (its
// backslash first) is the one canonical form writes for its character
// (appendEscapedRune): the two-character escapes but \/, and \u00xx in
// lower case for the other control characters. A string whose escapes all
// are is copied as it is instead of being decoded and escaped again; the
// parse has looked at every escape already.
func canonicalEscape(esc []byte) bool {
	switch esc[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if len(esc) != 6 || esc[2] != '0' || esc[3] != '0' || (esc[4] != '0' && esc[4] != '1') {
			return false
		}
		if c := esc[5]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
		switch hexVal(esc[2:6]) {
		case '\b', '\t', '\n', '\f', '\r':
			return false // written as the two-character escape
		}
		return true
	}
	return false // \/
}

// escape validates the escape sequence at s[i] == '\\' and returns its
// length and the character it stands for.
func (p *parser) escape(i int) (int, rune, error) {
	s := p.src
	if i+1 >= len(s) {
		return 0, 0, newErr(i, CodeUnexpectedEnd, ErrInvalid, "unexpected end of input in escape")
	}
	switch c := s[i+1]; c {
	case '"', '\\', '/':
		return 2, rune(c), nil
	case 'b', 'f', 'n', 'r', 't':
		return 2, rune(shortEscape[c]), nil
	case 'u':
	default:
		return 0, 0, newErr(i, CodeInvalidEscape, ErrInvalid, "invalid escape sequence \\%s", string(rune(s[i+1])))
	}
	u, err := p.hex4(i)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case u >= 0xDC00 && u <= 0xDFFF:
		return 0, 0, newErr(i, CodeLoneSurrogate, ErrInvalid, "low surrogate \\u%04x without a preceding high surrogate", u)
	case u >= 0xD800 && u <= 0xDBFF:
		if i+7 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
			lo, err := p.hex4(i + 6)
			if err != nil {
				return 0, 0, err
			}
			if lo >= 0xDC00 && lo <= 0xDFFF {
				r := 0x10000 + (u-0xD800)<<10 + (lo - 0xDC00)
				if isNoncharacter(r) {
					return 0, 0, noncharacterErr(i, r)
				}
				return 12, r, nil
			}
		}
		return 0, 0, newErr(i, CodeLoneSurrogate, ErrInvalid, "high surrogate \\u%04x not followed by a low surrogate", u)
	case isNoncharacter(u):
		return 0, 0, noncharacterErr(i, u)
	}
	return 6, u, nil
}

// isNoncharacter reports whether r is one of the 66 noncharacters that
// I-JSON (RFC 7493 §2.1) forbids: U+FDD0..U+FDEF and the last two code
// points of every plane (U+FFFE, U+FFFF, U+1FFFE, ... U+10FFFF).
func isNoncharacter(r rune) bool {
	return r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE
}

// rawNoncharacter reports whether the valid 3- or 4-byte UTF-8 sequence seq
// encodes a noncharacter, without decoding it: EF B7 90..AF is
// U+FDD0..U+FDEF, EF BF BE/BF is U+FFFE/U+FFFF, and a 4-byte sequence ends
// a plane when its low 16 bits are all ones but the last.
func rawNoncharacter(seq []byte) bool {
	if len(seq) == 3 {
		return seq[0] == 0xEF && (seq[1] == 0xB7 && seq[2] >= 0x90 && seq[2] <= 0xAF || seq[1] == 0xBF && seq[2] >= 0xBE)
	}
	return seq[1]&0x0F == 0x0F && seq[2] == 0xBF && seq[3] >= 0xBE
}

func noncharacterErr(off int, r rune) *SyntaxError {
	return newErr(off, CodeNoncharacter, ErrInvalid, "noncharacter U+%04X is not allowed in I-JSON", r)
}

func (p *parser) hex4(i int) (rune, error) {
	s := p.src
	if i+6 > len(s) {
		for j := i + 2; j < len(s); j++ {
			if unhex(s[j]) < 0 {
				return 0, newErr(i, CodeInvalidEscape, ErrInvalid, "invalid \\u escape: want 4 hex digits")
			}
		}
		return 0, newErr(len(s), CodeUnexpectedEnd, ErrInvalid, "unexpected end of input in \\u escape")
	}
	var r rune
	for j := i + 2; j < i+6; j++ {
		h := unhex(s[j])
		if h < 0 {
			return 0, newErr(i, CodeInvalidEscape, ErrInvalid, "invalid \\u escape: want 4 hex digits")
		}
		r = r<<4 | h
	}
	return r, nil
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

// appendUnescaped decodes the body of an already validated string. It
// copies eight bytes at a time into room grown once: every escape decodes
// to fewer bytes than it takes (two to one, six to at most three, twelve
// to four), so the text is never longer than s.
func appendUnescaped(dst, s []byte) []byte {
	o := len(dst)
	dst = slices.Grow(dst, len(s))[:o+len(s)]
	for i := 0; i < len(s); {
		// The text written so far is no longer than the input read
		// (o-start <= i), so an eight-byte store at o fits whenever
		// eight bytes at i can be read.
		if i+8 <= len(s) {
			v := binary.LittleEndian.Uint64(s[i:])
			binary.LittleEndian.PutUint64(dst[o:], v)
			m := backslashes(v)
			if m == 0 {
				i, o = i+8, o+8
				continue
			}
			k := bits.TrailingZeros64(m) >> 3
			i, o = i+k, o+k
		} else if s[i] != '\\' {
			dst[o] = s[i]
			i, o = i+1, o+1
			continue
		}
		switch s[i+1] {
		case 'b':
			dst[o] = '\b'
		case 'f':
			dst[o] = '\f'
		case 'n':
			dst[o] = '\n'
		case 'r':
			dst[o] = '\r'
		case 't':
			dst[o] = '\t'
		case 'u':
			r := hexVal(s[i+2 : i+6])
			if r >= 0xD800 && r <= 0xDBFF {
				lo := hexVal(s[i+8 : i+12])
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			}
			o += utf8.EncodeRune(dst[o:], r)
			i += 6
			continue
		default: // '"', '\\', '/'
			dst[o] = s[i+1]
		}
		i, o = i+2, o+1
	}
	return dst[:o]
}

func hexVal(h []byte) rune {
	var r rune
	for _, c := range h {
		r = r<<4 | unhex(c)
	}
	return r
}

func (p *parser) number(i int) (int, error) {
	s := p.src
	start := i
	frac := false
	if s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s):
		return i, newErr(i, CodeUnexpectedEnd, ErrInvalid, "unexpected end of input in number")
	case s[i] == '0':
		i++
		if i < len(s) && s[i] >= '0' && s[i] <= '9' {
			return i, newErr(start, CodeLeadingZero, ErrInvalid, "number with a leading zero")
		}
	case s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return i, newErr(start, CodeInvalidNumber, ErrInvalid, "want a digit after '-'")
	}
	if i < len(s) && s[i] == '.' {
		frac = true
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return i, newErr(start, CodeInvalidNumber, ErrInvalid, "want a digit after the decimal point")
		}
	}
	expAt := -1
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		frac = true
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		expAt = i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == expAt {
			return i, newErr(start, CodeInvalidNumber, ErrInvalid, "want a digit in the exponent")
		}
	}
	if i < len(s) && (isIdentByte(s[i]) || s[i] == '.') {
		return i, newErr(start, CodeInvalidNumber, ErrInvalid, "invalid character %s in number", describe(s[i]))
	}
	if i-start > p.opt.MaxStringBytes {
		return i, newErr(start, CodeStringLimit, ErrTooLong, "number literal of %d bytes is over the limit of %d bytes", i-start, p.opt.MaxStringBytes)
	}
	// The range rule (docs/normalize.md): a literal must keep its value's
	// magnitude class as a double, neither overflowing to infinity nor
	// turning a non-zero value into zero. Only these literals can break it:
	// one with an exponent, one over 300 characters, an integer of 309 or
	// more digits (the largest double has 309).
	digits := i - start
	if s[start] == '-' {
		digits--
	}
	if (frac && (expAt >= 0 || i-start > 300)) || (!frac && digits >= 309) {
		if err := checkRange(s[start:i], start); err != nil {
			return i, err
		}
	}
	p.nodes = append(p.nodes, node{kind: kNumber, num: frac, start: int32(start), end: int32(i), next: int32(len(p.nodes) + 1)})
	return i, nil
}

// checkRange rejects a literal that a double cannot hold: one that rounds
// to infinity, or a non-zero one that rounds to zero.
func checkRange(lit []byte, off int) error {
	f, err := parseLiteral(lit)
	if err != nil {
		return newErr(off, CodeNumberRange, ErrInvalid, "number %s is outside the range of a double", quoteShort(lit))
	}
	if f == 0 && nonZeroMantissa(lit) {
		return newErr(off, CodeNumberRange, ErrInvalid, "number %s is too small for a double: it would become 0", quoteShort(lit))
	}
	return nil
}

// parseLiteral returns the double nearest to a valid JSON number literal,
// or an error when it overflows. strconv.ParseFloat (Go 1.26) is wrong on
// two kinds of long literal, where Python's float and JavaScript's Number
// are right: it reads at most five digits of an exponent, so a long mantissa
// that offsets a long exponent ("111…1.5e-100000" with 100,000 ones, which
// is 0.111…) comes out as 0 (Go issue 42436); and it counts at most 800 digits before the
// decimal point, so "1" followed by 800 zeros and "e-800" comes out as 0.1.
// A literal with more than five exponent digits or a mantissa over 700
// characters is rewritten first as "0." and its significant digits (at most
// 800, then one sticky non-zero digit, which keeps the rounding of the
// digits cut) with its exact decimal exponent.
func parseLiteral(lit []byte) (float64, error) {
	e := 0
	for e < len(lit) && lit[e] != 'e' && lit[e] != 'E' {
		e++
	}
	exp := lit[min(e+1, len(lit)):]
	if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	for len(exp) > 0 && exp[0] == '0' {
		exp = exp[1:]
	}
	if len(exp) <= 5 && e <= 700 {
		return strconv.ParseFloat(string(lit), 64)
	}
	return parseReduced(lit)
}

// parseReduced is parseLiteral's path for long exponents, for any valid
// literal: significant digits and exact exponent, then ParseFloat.
func parseReduced(lit []byte) (float64, error) {
	e := 0
	for e < len(lit) && lit[e] != 'e' && lit[e] != 'E' {
		e++
	}
	var exp []byte
	expNeg := false
	if e < len(lit) {
		exp = lit[e+1:]
		if exp[0] == '+' || exp[0] == '-' {
			expNeg = exp[0] == '-'
			exp = exp[1:]
		}
		for len(exp) > 0 && exp[0] == '0' {
			exp = exp[1:]
		}
	}
	neg := lit[0] == '-'
	mant := lit[:e]
	if neg {
		mant = mant[1:]
	}
	// value = 0.digits × 10^point, digits without leading or trailing zeros.
	var digits []byte
	point, seenPoint := 0, false
	for _, c := range mant {
		switch {
		case c == '.':
			seenPoint = true
		case c == '0' && len(digits) == 0:
			if seenPoint {
				point--
			}
		default:
			digits = append(digits, c)
			if !seenPoint {
				point++
			}
		}
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	if len(digits) == 0 {
		return 0, nil
	}
	// |point| is at most the literal's length (under 2^31); an exponent of
	// ten or more digits is beyond any point it could offset.
	x := int64(0)
	if len(exp) > 10 {
		x = 1 << 40
	} else if len(exp) > 0 {
		x, _ = strconv.ParseInt(string(exp), 10, 64)
	}
	if expNeg {
		x = -x
	}
	total := int64(point) + x
	switch {
	case total > 400 && neg:
		return strconv.ParseFloat("-1e400", 64) // -Inf and ErrRange, as ParseFloat reports it
	case total > 400:
		return strconv.ParseFloat("1e400", 64)
	case total < -400:
		return 0, nil
	}
	var b []byte
	if neg {
		b = append(b, '-')
	}
	b = append(b, "0."...)
	if len(digits) > 800 {
		b = append(append(b, digits[:800]...), '1')
	} else {
		b = append(b, digits...)
	}
	b = append(b, 'e')
	b = strconv.AppendInt(b, total, 10)
	return strconv.ParseFloat(string(b), 64)
}

// nonZeroMantissa reports whether a number literal has a non-zero digit
// before its exponent, that is whether its value is not zero.
func nonZeroMantissa(lit []byte) bool {
	for _, c := range lit {
		switch {
		case c == 'e' || c == 'E':
			return false
		case c >= '1' && c <= '9':
			return true
		}
	}
	return false
}

// appendNumber writes the canonical form of a validated number literal.
// Integer literals (no fraction, no exponent) are kept as written, "-0"
// aside: within ±2^53 that is already the ECMAScript form, and beyond it the
// written digits are the exact value, which the form of the nearest double
// would change (Python and JavaScript BigInt readers see the difference).
// Every other literal is read as a double and written as RFC 8785 does.
func (p *parser) appendNumber(dst []byte, lit []byte, frac bool) []byte {
	if !frac {
		if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
			return append(dst, '0')
		}
		return append(dst, lit...)
	}
	f, _ := parseLiteral(lit)
	p.digits = strconv.AppendFloat(p.digits[:0], f, 'e', -1, 64)
	return appendShortest(dst, p.digits)
}

// appendShortest rewrites strconv's shortest 'e' form ("-d.ddde±XX") in the
// ECMAScript layout.
func appendShortest(dst, e []byte) []byte {
	neg := false
	if e[0] == '-' {
		neg = true
		e = e[1:]
	}
	x := 0
	for x < len(e) && e[x] != 'e' {
		x++
	}
	mant := e[:x]
	exp := 0
	eneg := e[x+1] == '-'
	for _, c := range e[x+2:] {
		exp = exp*10 + int(c-'0')
	}
	if eneg {
		exp = -exp
	}
	// Digits without the point: mant is "d" or "d.ddd".
	var buf [24]byte
	d := append(buf[:0], mant[0])
	if len(mant) > 2 {
		d = append(d, mant[2:]...)
	}
	if len(d) == 1 && d[0] == '0' {
		return append(dst, '0')
	}
	return appendES(dst, neg, d, exp+1)
}

// appendES lays out 0.d × 10^n the way ECMAScript's Number::toString does.
func appendES(dst []byte, neg bool, d []byte, n int) []byte {
	if len(d) == 0 {
		return append(dst, '0')
	}
	if neg {
		dst = append(dst, '-')
	}
	k := len(d)
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for j := k; j < n; j++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for j := n; j < 0; j++ {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		e := n - 1
		if e < 0 {
			dst = append(dst, '-')
			e = -e
		} else {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(e), 10)
	}
	return dst
}

func appendRune(dst []byte, r rune) []byte { return utf8.AppendRune(dst, r) }

// utf8Len returns the length of the valid UTF-8 sequence at the start of s
// (which starts with a byte >= 0x80), or 0 when it is not valid: stray
// continuation bytes, overlong forms, encoded surrogates, values above
// U+10FFFF and truncated sequences are all invalid.
func utf8Len(s []byte) int {
	c := s[0]
	switch {
	case c < 0xC2:
		return 0
	case c < 0xE0:
		if len(s) < 2 || s[1]&0xC0 != 0x80 {
			return 0
		}
		return 2
	case c < 0xF0:
		if len(s) < 3 || s[1]&0xC0 != 0x80 || s[2]&0xC0 != 0x80 {
			return 0
		}
		if c == 0xE0 && s[1] < 0xA0 || c == 0xED && s[1] >= 0xA0 {
			return 0
		}
		return 3
	case c < 0xF5:
		if len(s) < 4 || s[1]&0xC0 != 0x80 || s[2]&0xC0 != 0x80 || s[3]&0xC0 != 0x80 {
			return 0
		}
		if c == 0xF0 && s[1] < 0x90 || c == 0xF4 && s[1] >= 0x90 {
			return 0
		}
		return 4
	}
	return 0
}
