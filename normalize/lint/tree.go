package lint

import (
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

type kind uint8

const (
	kString kind = iota + 1
	kNumber
	kObject
	kArray
	kLiteral
)

// node is one JSON value with its byte span in the body it was parsed from.
type node struct {
	kind       kind
	start, end int // span of the value; strings include their quotes
	path       string
	text       string // decoded text of a string, the literal of a number
	members    []member
	elems      []*node
}

type member struct {
	name      string
	nameStart int // offset of the opening quote of the name
	value     *node
}

func (n *node) get(name string) *node {
	if n == nil || n.kind != kObject {
		return nil
	}
	for _, m := range n.members {
		if m.name == name {
			return m.value
		}
	}
	return nil
}

// walk calls fn for n and every value inside it, in document order.
func (n *node) walk(fn func(*node)) {
	fn(n)
	for _, m := range n.members {
		m.value.walk(fn)
	}
	for _, e := range n.elems {
		e.walk(fn)
	}
}

// layout records what a parse saw between tokens, for the noncanonical
// rule: the first insignificant whitespace and how much there was.
type layout struct {
	wsBytes int
	wsAt    int
	wsPath  string
}

type treeParser struct {
	b   []byte
	i   int
	lay layout
}

var errMalformed = errors.New("malformed json")

// parseTree parses a body that package normalize has already validated; it
// still fails cleanly rather than panicking on anything else. One line end
// (LF or CRLF) right after the value is not counted as whitespace: it is
// how a file holding the body ends, and it never reaches a prefix.
func parseTree(b []byte) (*node, layout, error) {
	p := &treeParser{b: b, lay: layout{wsAt: -1}}
	p.ws("")
	n, err := p.value("", 0)
	if err != nil {
		return nil, p.lay, err
	}
	if rest := b[p.i:]; string(rest) == "\n" || string(rest) == "\r\n" {
		p.i = len(b) // a file's own line end, not whitespace in the body
	}
	p.ws("")
	if p.i != len(b) {
		return nil, p.lay, errMalformed
	}
	return n, p.lay, nil
}

func (p *treeParser) ws(path string) {
	start := p.i
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
			continue
		}
		break
	}
	if p.i > start {
		if p.lay.wsAt < 0 {
			p.lay.wsAt, p.lay.wsPath = start, path
		}
		p.lay.wsBytes += p.i - start
	}
}

func memberPath(parent, name string) string {
	if isIdent(name) {
		if parent == "" {
			return boundPath(name)
		}
		return boundPath(parent + "." + name)
	}
	return boundPath(parent + "[" + strconv.Quote(name) + "]")
}

func indexPath(parent string, i int) string {
	return boundPath(parent + "[" + strconv.Itoa(i) + "]")
}

// maxPathLen bounds a node's path. Every node keeps its path, and a path
// repeats its parent's: unbounded, one long member name above many values
// (or 128 levels of long names) costs memory quadratic in the body.
const maxPathLen = 200

// boundPath cuts a path longer than maxPathLen and appends a hash of the
// whole of it, so that different paths stay different and the same path
// is cut the same way in the body as sent and in its canonical form (the
// linter matches nodes of the two by path).
func boundPath(p string) string {
	if len(p) <= maxPathLen {
		return p
	}
	h := fnv.New64a()
	h.Write([]byte(p))
	cut := maxPathLen - 40
	for cut > 0 && p[cut]&0xC0 == 0x80 {
		cut--
	}
	return p[:cut] + "…#" + strconv.FormatUint(h.Sum64(), 16)
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func (p *treeParser) value(path string, depth int) (*node, error) {
	if p.i >= len(p.b) || depth > 512 {
		return nil, errMalformed
	}
	n := &node{start: p.i, path: path}
	var err error
	switch c := p.b[p.i]; {
	case c == '"':
		n.kind = kString
		n.text, err = p.str()
	case c == '{':
		n.kind = kObject
		err = p.object(n, depth)
	case c == '[':
		n.kind = kArray
		err = p.array(n, depth)
	case c == '-' || c >= '0' && c <= '9':
		j := p.i
		for j < len(p.b) && strings.IndexByte("+-.0123456789eE", p.b[j]) >= 0 {
			j++
		}
		n.kind, n.text = kNumber, string(p.b[p.i:j])
		p.i = j
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if strings.HasPrefix(string(p.b[p.i:min(len(p.b), p.i+5)]), lit) {
				n.kind, n.text = kLiteral, lit
				p.i += len(lit)
				break
			}
		}
		if n.kind == 0 {
			return nil, errMalformed
		}
	}
	if err != nil {
		return nil, err
	}
	n.end = p.i
	return n, nil
}

// object reads the members of the object n, whose '{' is at p.i.
func (p *treeParser) object(n *node, depth int) error {
	path := n.path
	p.i++
	p.ws(path)
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return errMalformed
		}
		ns := p.i
		name, err := p.str()
		if err != nil {
			return err
		}
		p.ws(path)
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return errMalformed
		}
		p.i++
		mp := memberPath(path, name)
		p.ws(mp)
		v, err := p.value(mp, depth+1)
		if err != nil {
			return err
		}
		n.members = append(n.members, member{name: name, nameStart: ns, value: v})
		if done, err := p.next(path, '}'); done || err != nil {
			return err
		}
	}
}

// array reads the elements of the array n, whose '[' is at p.i.
func (p *treeParser) array(n *node, depth int) error {
	path := n.path
	p.i++
	p.ws(path)
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		v, err := p.value(indexPath(path, len(n.elems)), depth+1)
		if err != nil {
			return err
		}
		n.elems = append(n.elems, v)
		if done, err := p.next(path, ']'); done || err != nil {
			return err
		}
	}
}

// next moves past the ',' after a member or element, or the closing
// bracket, which ends the object or array (done).
func (p *treeParser) next(path string, closing byte) (done bool, err error) {
	p.ws(path)
	if p.i >= len(p.b) {
		return false, errMalformed
	}
	if p.b[p.i] == closing {
		p.i++
		return true, nil
	}
	if p.b[p.i] != ',' {
		return false, errMalformed
	}
	p.i++
	p.ws(path)
	return false, nil
}

// str decodes the string at p.i and moves past it.
func (p *treeParser) str() (string, error) {
	var sb strings.Builder
	j := p.i + 1
	for {
		if j >= len(p.b) {
			return "", errMalformed
		}
		c := p.b[j]
		if c == '"' {
			p.i = j + 1
			return sb.String(), nil
		}
		if c != '\\' {
			sb.WriteByte(c)
			j++
			continue
		}
		r, w := unescape(p.b[j:])
		if w == 0 {
			return "", errMalformed
		}
		sb.WriteRune(r)
		j += w
	}
}

// unescape decodes the escape at the start of b (b[0] == '\\'), joining a
// surrogate pair, and returns the rune and the bytes it took; w is 0 for a
// malformed escape.
func unescape(b []byte) (r rune, w int) {
	if len(b) < 2 {
		return 0, 0
	}
	switch b[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case '"', '\\', '/':
		return rune(b[1]), 2
	case 'u':
		r1, ok := hex4(b[2:])
		if !ok {
			return 0, 0
		}
		if utf16.IsSurrogate(r1) && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if r2, ok := hex4(b[8:]); ok {
				if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
					return r, 12
				}
			}
		}
		return r1, 6
	}
	return 0, 0
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v), err == nil
}

// rawOffset returns the byte offset, inside the body, of the character at
// charOff of the decoded string node n (whose raw form may hold escapes).
func rawOffset(body []byte, n *node, charOff int) int {
	if n == nil {
		return 0
	}
	if n.kind != kString {
		return n.start
	}
	j := n.start + 1
	for k := 0; k < charOff && j < n.end-1; k++ {
		if body[j] == '\\' {
			_, w := unescape(body[j:])
			j += max(w, 2)
			continue
		}
		_, w := utf8.DecodeRune(body[j:])
		j += w
	}
	return j
}

// pathIndex maps each path of a tree to its node.
func pathIndex(root *node) map[string]*node {
	m := make(map[string]*node)
	root.walk(func(n *node) { m[n.path] = n })
	return m
}
