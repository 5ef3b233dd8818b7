package normalize

import "sync"

// Native routing text. Native mode keys on the canonical body's bytes, but
// a body also carries members that must never move a key: sampling
// parameters ("temperature") and volatile metadata ("user", "stream"). So
// the native routing text is the canonical body with only its routing
// members, in canonical order:
//
//   - a chat body (top-level "messages"): the chat prompt-defining members
//     (model, chat_template, chat_template_kwargs, tools, documents,
//     messages, add_generation_prompt, continue_final_message);
//   - a completion body ("prompt"): model, prompt, suffix;
//   - a native body ("inputs"): inputs alone, since its "parameters" object
//     holds the generation parameters;
//   - any other object: every member except the volatile metadata, since
//     which of its members are parameters is unknown;
//   - a body that is not an object: all of it.
//
// The schema is the one the body's members show, whatever mode the caller
// chose: "--mode native" on a chat body still leaves its temperature out.

// nativeRoutingPrompt lists the routing members of a native body.
var nativeRoutingPrompt = []string{"inputs"}

// memberSpan is one top-level member of a canonical body: b[start] is the
// opening quote of its name, b[start+1:nameEnd] the name, b[start:end] the
// whole member.
type memberSpan struct{ start, nameEnd, end int }

var spanPool = sync.Pool{New: func() any { s := make([]memberSpan, 0, 32); return &s }}

// appendNativeText appends the native routing text of the canonical body b
// to dst, at most limit bytes of it (the caller cuts windows from it). It
// reads the top level once, recording where each member is, then copies
// the routing members.
func appendNativeText(dst, b []byte, limit int) ([]byte, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return append(dst, b[:min(len(b), limit)]...), nil
	}
	sp := spanPool.Get().(*[]memberSpan)
	defer spanPool.Put(sp)
	spans := (*sp)[:0]
	var has promptMembers
	for i = skipWS(b, i+1); i < len(b) && b[i] != '}'; {
		if b[i] != '"' {
			return dst, structErr(i, "want a member name")
		}
		ke, err := stringEnd(b, i)
		if err != nil {
			return dst, err
		}
		has.note(b[i+1 : ke-1])
		c := skipWS(b, ke)
		if c >= len(b) || b[c] != ':' {
			return dst, structErr(c, "want ':'")
		}
		ve, err := valueEnd(b, skipWS(b, c+1))
		if err != nil {
			return dst, err
		}
		spans = append(spans, memberSpan{start: i, nameEnd: ke - 1, end: ve})
		i = skipWS(b, ve)
		if i < len(b) && b[i] == ',' {
			if i = skipWS(b, i+1); i < len(b) && b[i] == '}' {
				return dst, structErr(i, "trailing comma")
			}
		} else if i >= len(b) || b[i] != '}' {
			return dst, structErr(i, "want ',' or '}'")
		}
	}
	*sp = spans
	if i >= len(b) {
		return dst, structErr(i, "unterminated object")
	}
	keep := nativeKeep(has)
	start := len(dst)
	dst = append(dst, '{')
	first := true
	for _, m := range spans {
		if len(dst)-start > limit {
			break
		}
		if !keep(b[m.start+1 : m.nameEnd]) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, b[m.start:m.end]...)
	}
	dst = append(dst, '}')
	if len(dst)-start > limit {
		dst = dst[:start+limit]
	}
	return dst, nil
}

// promptMembers notes which of the members that define a known schema's
// prompt an object has: messages (chat), prompt (completion) and inputs
// (native), tried in that order; and the members that tell the other
// schemas apart (detect).
type promptMembers struct {
	messages, prompt, inputs bool
	// system, maxTokens and stopSequences mark a Messages body among the
	// bodies with messages; input a Responses or pooling body; query with
	// documents a rerank body, text_1 with text_2 a score body.
	system, maxTokens, stopSequences, input bool
	query, documents, text1, text2          bool
}

func (h *promptMembers) note(name []byte) {
	switch string(name) {
	case "messages":
		h.messages = true
	case "prompt":
		h.prompt = true
	case "inputs":
		h.inputs = true
	case "system":
		h.system = true
	case "max_tokens":
		h.maxTokens = true
	case "stop_sequences":
		h.stopSequences = true
	case "input":
		h.input = true
	case "query":
		h.query = true
	case "documents":
		h.documents = true
	case "text_1":
		h.text1 = true
	case "text_2":
		h.text2 = true
	}
}

// detect is ModeAuto's rule (docs/normalize.md, "Schema detection"):
// messages is chat unless the body also has max_tokens and system or
// stop_sequences (Messages); then prompt, inputs; input is Responses when
// items says it holds items, else pooling; query with documents, or
// text_1 with text_2, is pooling. items is asked only for a body with
// input.
func (h *promptMembers) detect(items func() bool) Mode {
	switch {
	case h.messages:
		if h.maxTokens && (h.system || h.stopSequences) {
			return ModeMessages
		}
		return ModeChat
	case h.prompt:
		return ModeCompletion
	case h.inputs:
		return ModeNative
	case h.input:
		if items() {
			return ModeResponses
		}
		return ModePooling
	case (h.query && h.documents) || (h.text1 && h.text2):
		return ModePooling
	}
	return ModeAuto
}

// nativeKeep returns the test for routing members of an object with the
// prompt members has.
func nativeKeep(has promptMembers) func(name []byte) bool {
	switch {
	case has.messages:
		return func(name []byte) bool { return inList(name, chatPrompt) }
	case has.prompt:
		return func(name []byte) bool { return inList(name, completionPrompt) }
	case has.inputs:
		return func(name []byte) bool { return inList(name, nativeRoutingPrompt) }
	}
	return func(name []byte) bool { return !isVolatile(name) }
}

func inList(name []byte, list []string) bool {
	for _, n := range list {
		if string(name) == n {
			return true
		}
	}
	return false
}
