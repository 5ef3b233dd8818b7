package lint

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/prefixgate/prefixgate/normalize"
)

// checkOne runs the per-request rules on body.
func checkOne(index int, body []byte, opts Options) ([]Finding, *request) {
	canon, mode, err := normalize.AppendCanonical(nil, body, normalize.Options{Mode: opts.Mode})
	if err != nil {
		return []Finding{invalidFinding(index, err)}, nil
	}
	if mode == normalize.ModeAuto {
		mode = normalize.ModeNative
	}
	info, err := normalize.RouteKey(canon, normalize.KeyOptions{Mode: mode, PrefixLength: opts.PrefixLength})
	if err != nil {
		return []Finding{invalidFinding(index, err)}, nil
	}
	rtree, lay, err := parseTree(body)
	if err != nil {
		return []Finding{{RuleID: ruleInvalidJSON, Severity: Error, RequestIndex: index, Message: "the body could not be read as JSON", Hint: "fix the JSON"}}, nil
	}
	ctree, _, err := parseTree(canon)
	if err != nil {
		return []Finding{{RuleID: ruleInvalidJSON, Severity: Error, RequestIndex: index, Message: "the canonical body could not be read back", Hint: "report this as a bug"}}, nil
	}
	req := &request{index: index, body: body, canon: canon, mode: mode, info: info}
	req.rt = buildRoutingText(mode, canon, ctree, rtree)
	var out []Finding
	injections := dateInjectionFindings(req, ctree, rtree)
	out = append(out, withoutInjectedDates(volatileFindings(req, opts), injections)...)
	out = append(out, injections...)
	out = append(out, metadataFindings(req, rtree, opts)...)
	out = append(out, noncanonicalFindings(req, rtree, ctree, lay, opts)...)
	if req.rt.whole && req.rt.units < opts.PrefixLength && req.rt.units > 0 {
		seg := firstSegment(req.rt)
		f := Finding{
			RuleID: ruleShortPrompt, Severity: Info, RequestIndex: index,
			Message: fmt.Sprintf("the routing text (%d of %d %s) is the whole %s, so requests that share only part of it cannot share a key", req.rt.units, opts.PrefixLength, unitName(mode), wholeName(mode)),
			Hint:    "send shared context (instructions, documents) as earlier messages and the question last; in chat mode the final message is left out of the key",
		}
		if seg != nil {
			f.JSONPath, f.BodyOffset = seg.path, rawOffset(body, seg.raw, 0)
		}
		out = append(out, f)
	}
	return out, req
}

// withoutInjectedDates drops the volatile-date and volatile-timestamp
// findings of the dates that a date-injection finding already reports, so
// that one value is reported once, by the rule that names its cause.
func withoutInjectedDates(vols, injections []Finding) []Finding {
	if len(injections) == 0 {
		return vols
	}
	out := vols[:0]
	for _, v := range vols {
		covered := false
		for _, in := range injections {
			if (v.RuleID == ruleDate || v.RuleID == ruleTimestamp) && v.JSONPath == in.JSONPath && v.Offset >= in.Offset && v.Offset < in.spanEnd {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, v)
		}
	}
	return out
}

func unitName(m normalize.Mode) string {
	if m == normalize.ModeNative {
		return "bytes"
	}
	return "characters"
}

func wholeName(m normalize.Mode) string {
	switch m {
	case normalize.ModeCompletion:
		return "prompt"
	case normalize.ModePooling:
		return "input"
	}
	return "single message"
}

func firstSegment(rt *routingText) *segment {
	if len(rt.segs) == 0 {
		return nil
	}
	return &rt.segs[0]
}

func invalidFinding(index int, err error) Finding {
	f := Finding{RuleID: ruleInvalidJSON, Severity: Error, RequestIndex: index, Message: err.Error(),
		Hint: "the router rejects this body with 400; fix the serializer rather than the router (bodies are never repaired)"}
	var se *normalize.SyntaxError
	if errors.As(err, &se) {
		f.Offset, f.BodyOffset = int(se.Offset), int(se.Offset)
	}
	if errors.Is(err, normalize.ErrSchema) {
		f.RuleID = ruleSchema
		f.Hint = "pick the right --mode, or send the members the mode needs"
	}
	return f
}

var volatileHints = map[string]string{
	ruleTimestamp: "move the timestamp after the window (last message, or metadata) or drop it; the model rarely needs the exact second",
	ruleDate:      "move the date after the shared context (for example into the final user message) so the prefix stays stable across days",
	ruleUUID:      "move ids out of the prompt into request metadata, or after the shared context",
	ruleID:        "move request and trace ids out of the prompt into headers or metadata, or after the shared context",
}

// scanMargin is how far past the window a scan reads, so that a value
// that starts inside the window is matched whole.
const scanMargin = 64

// maxVolatilePerRequest caps volatile findings per request: past a handful
// the request's problem is clear, and a pathological body cannot turn into
// a quadratic amount of work or output.
const maxVolatilePerRequest = 20

// volatileFindings reports volatile values that fall inside the window.
// Only the part of each text inside the window (plus a margin) is scanned,
// which bounds the work per request by N whatever the body's size.
func volatileFindings(req *request, opts Options) []Finding {
	var out []Finding
	rt := req.rt
	for i := range rt.segs {
		seg := &rt.segs[i]
		if seg.start >= opts.PrefixLength {
			continue
		}
		text := prefixChars(seg.text, opts.PrefixLength-seg.start+scanMargin)
		pos, chars, at := seg.start, 0, 0
		for _, m := range findVolatile(text) {
			pos += rt.measure(text[at:m.start], seg.escaped)
			chars += utf8.RuneCountInString(text[at:m.start])
			at = m.start
			if pos >= opts.PrefixLength || len(out) == maxVolatilePerRequest {
				break
			}
			out = append(out, Finding{
				RuleID: m.rule, Severity: Warning, RequestIndex: req.index,
				JSONPath: seg.path, Offset: chars, BodyOffset: rawOffset(req.body, seg.raw, chars),
				Message: fmt.Sprintf("%s %q inside the routing window (N=%d)", m.what, clip(text[m.start:m.end], 48), opts.PrefixLength),
				Hint:    volatileHints[m.rule],
			})
		}
	}
	return out
}

// prefixChars returns the first n characters of s.
func prefixChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	k := 0
	for i := range s {
		if k == n {
			return s[:i]
		}
		k++
	}
	return s
}

func charCount(s string) int { return len([]rune(s)) }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// dateInjectionFindings looks at the texts that start a rendered prompt:
// system and developer messages, the chat template, a completion prompt,
// Responses instructions, a Messages system prompt and native inputs.
func dateInjectionFindings(req *request, ctree, rtree *node) []Finding {
	var texts []*node
	if t := ctree.get("chat_template"); t != nil && t.kind == kString {
		texts = append(texts, t)
	}
	switch req.mode {
	case normalize.ModeChat:
		if msgs := ctree.get("messages"); msgs != nil {
			for _, m := range msgs.elems {
				role := m.get("role")
				if role == nil || role.kind != kString || (role.text != "system" && role.text != "developer") {
					continue
				}
				c := m.get("content")
				switch {
				case c == nil:
				case c.kind == kString:
					texts = append(texts, c)
				case c.kind == kArray:
					for _, part := range c.elems {
						if part.kind == kObject && isTextPart(part) {
							texts = append(texts, part.get("text"))
						}
					}
				}
			}
		}
	case normalize.ModeCompletion:
		if p := ctree.get("prompt"); p != nil && p.kind == kString {
			texts = append(texts, p)
		}
	case normalize.ModeResponses:
		if p := ctree.get("instructions"); p != nil && p.kind == kString {
			texts = append(texts, p)
		}
	case normalize.ModeMessages:
		texts = append(texts, systemTexts(ctree.get("system"))...)
	default:
		if p := ctree.get("inputs"); p != nil && p.kind == kString {
			texts = append(texts, p)
		}
	}
	raw := pathIndex(rtree)
	var out []Finding
	for _, t := range texts {
		head := prefixChars(t.text, injectionWindow+scanMargin)
		m, ok := findDateInjection(head, findVolatile(head))
		if !ok {
			continue
		}
		off := charCount(head[:m.start])
		out = append(out, Finding{
			RuleID: ruleDateInjection, Severity: Warning, RequestIndex: req.index,
			JSONPath: t.path, Offset: off, BodyOffset: rawOffset(req.body, raw[t.path], off), spanEnd: charCount(head[:m.end]),
			Message: fmt.Sprintf("today's date is injected near the start of the prompt (%q): every day gets new keys and a cold cache", clip(m.what, 60)),
			Hint:    "put the date in the final user message or at the end of the system prompt, after the stable instructions",
		})
	}
	return out
}

// volatileMemberNames are top-level members that change per request.
var volatileMemberNames = map[string]bool{
	"id": true, "request_id": true, "requestId": true, "trace_id": true, "traceId": true, "span_id": true,
	"correlation_id": true, "session_id": true, "sessionId": true, "timestamp": true, "created": true,
	"created_at": true, "createdAt": true, "time": true, "date": true, "ts": true, "user": true, "user_id": true,
	"userId": true, "metadata": true, "nonce": true, "seed": true, "uuid": true, "idempotency_key": true,
}

var promptMembers = map[string]bool{"inputs": true, "prompt": true, "messages": true}

// metadataFindings checks a native body as sent: volatile members ahead of
// the prompt put bookkeeping into the first bytes a byte-prefix router sees.
func metadataFindings(req *request, rtree *node, opts Options) []Finding {
	if req.mode != normalize.ModeNative || rtree.kind != kObject {
		return nil
	}
	var before []string
	var first *member
	for i, m := range rtree.members {
		if promptMembers[m.name] {
			break
		}
		if volatileMemberNames[m.name] {
			before = append(before, m.name)
			if first == nil {
				first = &rtree.members[i]
			}
		}
	}
	if first == nil {
		return nil
	}
	return []Finding{{
		RuleID: ruleMetadataFirst, Severity: Warning, RequestIndex: req.index,
		JSONPath: memberPath("", first.name), BodyOffset: first.nameStart,
		Message: fmt.Sprintf("volatile member%s %s sent ahead of the prompt", plural(len(before)), strings.Join(quoteAll(before), ", ")),
		Hint:    "serialize the prompt (inputs) first and bookkeeping last; prefixgate's normalizer reorders known members, a byte-prefix router keys on the bytes as sent",
	}}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = normalize.QuoteName(v)
	}
	return out
}

// noncanonicalFindings reports in one finding what the normalizer changes:
// whitespace, member order, string escapes, number spelling. The finding
// points at the earliest of them; the message names every kind without
// positions of its own, so that a finding shows one position.
func noncanonicalFindings(req *request, rtree, ctree *node, lay layout, opts Options) []Finding {
	if bytes.Equal(req.body, req.canon) {
		return nil
	}
	sev := Info
	hint := "prefixgate's normalizer fixes this before keying; serialize canonically (the SDKs do) if any router keys on raw bytes"
	if opts.Direct {
		sev = Warning
		hint = "a byte-prefix router keys on the bytes as sent: serialize canonically (the SDKs do) or put prefixgate's normalizer in front"
	}
	var f *Finding
	var parts, kinds []string
	add := func(kind, path string, off, bodyOff int, msg string) {
		parts, kinds = append(parts, msg), append(kinds, kind)
		if f == nil || bodyOff < f.BodyOffset {
			f = &Finding{RuleID: ruleNoncanonical, Severity: sev, RequestIndex: req.index,
				JSONPath: path, Offset: off, BodyOffset: bodyOff, Hint: hint}
		}
	}
	if lay.wsBytes > 0 {
		add("whitespace", lay.wsPath, 0, lay.wsAt, fmt.Sprintf("whitespace (%d byte%s between tokens)", lay.wsBytes, plural(lay.wsBytes)))
	}
	d := findDifferences(req.body, rtree, ctree)
	if d.orderAt != nil {
		where := d.orderAt.path + " not in JCS order"
		if d.orderAt.path == "" {
			where = fmt.Sprintf("top level not in %s schema order: prompt first, parameters, then metadata", req.mode)
		}
		add("member order", d.orderAt.path, 0, d.orderAt.start, fmt.Sprintf("member order (%s)", where))
	}
	if d.escCount > 0 {
		switch {
		case d.escAt != nil:
			off := firstEscape(req.body[d.escAt.start+1 : d.escAt.end-1])
			add("escapes", d.escAt.path, off.chars, d.escAt.start+1+off.bytes, fmt.Sprintf("escapes (%d string%s escaped differently from RFC 8785, for example \\u escapes of printable characters or \\/)", d.escCount, plural(d.escCount)))
		default:
			add("escapes", "", 0, d.escNameAt, fmt.Sprintf("escapes (%d string%s escaped differently from RFC 8785, first the member name %s)", d.escCount, plural(d.escCount), normalize.QuoteName(d.escName)))
		}
	}
	if d.numCount > 0 {
		add("number spelling", d.numAt.path, 0, d.numAt.start, fmt.Sprintf("number spelling (%d number%s not in shortest ECMAScript form, for example %s → %s)", d.numCount, plural(d.numCount), d.numFrom, d.numTo))
	}
	if f == nil {
		return nil
	}
	f.Message = "not in canonical form: " + strings.Join(parts, "; ")
	f.kinds = kinds
	return []Finding{*f}
}

// differences is what the noncanonical rule finds in a body as sent,
// besides whitespace: the first object out of order, the first string (or
// member name) escaped other than RFC 8785 escapes it and how many are,
// and the first number not in shortest form and how many are.
type differences struct {
	orderAt, escAt, numAt *node
	escName               string
	escNameAt             int
	escCount, numCount    int
	numFrom, numTo        string
}

// findDifferences compares the tree of the body as sent, rtree, with the
// tree of its canonical form, ctree.
func findDifferences(body []byte, rtree, ctree *node) differences {
	var d differences
	cidx := pathIndex(ctree)
	rtree.walk(func(n *node) {
		switch n.kind {
		case kObject:
			c := cidx[n.path]
			if d.orderAt == nil && c != nil && !sameOrder(n, c) {
				d.orderAt = n
			}
			for _, m := range n.members {
				if !escapedCanonically(body[m.nameStart:m.value.start]) {
					d.escCount++
					if d.escAt == nil && d.escName == "" {
						d.escName, d.escNameAt = m.name, m.nameStart
					}
				}
			}
		case kString:
			if !escapedCanonically(body[n.start:n.end]) {
				d.escCount++
				if d.escAt == nil && d.escName == "" {
					d.escAt = n
				}
			}
		case kNumber:
			c, err := normalize.Canonicalize([]byte(n.text))
			if err == nil && string(c) != n.text {
				d.numCount++
				if d.numAt == nil {
					d.numAt, d.numFrom, d.numTo = n, n.text, string(c)
				}
			}
		}
	})
	return d
}

func sameOrder(a, b *node) bool {
	if len(a.members) != len(b.members) {
		return false
	}
	for i := range a.members {
		if a.members[i].name != b.members[i].name {
			return false
		}
	}
	return true
}

// escapedCanonically reports whether the raw string token (with quotes,
// and for a member name possibly followed by whitespace and a colon) uses
// only the escapes RFC 8785 produces.
func escapedCanonically(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 >= len(raw) {
			return false
		}
		switch raw[i+1] {
		case '"', '\\', 'b', 'f', 'n', 'r', 't':
			i++
		case 'u':
			r, ok := hex4(raw[i+2:])
			// JCS writes \u00xx only for control characters without a
			// short escape, in lower case.
			if !ok || r >= 0x20 || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t' || string(raw[i+2:i+6]) != fmt.Sprintf("%04x", r) {
				return false
			}
			i += 5
		default:
			return false
		}
	}
	return true
}

type position struct{ chars, bytes int }

// firstEscape returns where the first non-canonical escape sits in a raw
// string's content.
func firstEscape(content []byte) position {
	var p position
	for i := 0; i < len(content); {
		if content[i] == '\\' {
			_, w := unescape(content[i:])
			if !escapedCanonically(content[i:min(len(content), i+max(w, 2))]) {
				p.bytes = i
				return p
			}
			i += max(w, 2)
		} else {
			for i++; i < len(content) && content[i]&0xC0 == 0x80; i++ {
			}
		}
		p.chars++
	}
	return position{}
}

// systemTexts returns a Messages system prompt's texts: the string, or each
// text block's text.
func systemTexts(sys *node) []*node {
	switch {
	case sys == nil:
		return nil
	case sys.kind == kString:
		return []*node{sys}
	}
	var out []*node
	for _, b := range sys.elems {
		if b.kind == kObject && isTextPart(b) {
			out = append(out, b.get("text"))
		}
	}
	return out
}
