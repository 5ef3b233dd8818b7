package normalize

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

// appendNativeText appends the native routing text of the canonical body b
// to dst, at most limit bytes of it (the caller cuts windows from it).
func appendNativeText(dst, b []byte, limit int) ([]byte, error) {
	start := len(dst)
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return append(dst, b[:min(len(b), limit)]...), nil
	}
	// First pass: which schema the members show.
	var hasMessages, hasPrompt, hasInputs bool
	if _, err := eachMemberAt(b, i, func(name []byte, vs int) (int, error) {
		switch string(name) {
		case "messages":
			hasMessages = true
		case "prompt":
			hasPrompt = true
		case "inputs":
			hasInputs = true
		}
		return valueEnd(b, vs)
	}); err != nil {
		return dst, err
	}
	keep := nativeKeep(hasMessages, hasPrompt, hasInputs)
	// Second pass: the kept members, as they are written in b, until the
	// text passes limit.
	dst = append(dst, '{')
	first := true
	_, err := eachMemberAt(b, i, func(name []byte, vs int) (int, error) {
		ve, err := valueEnd(b, vs)
		if err != nil || !keep(name) || len(dst)-start > limit {
			return ve, err
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		// name is b's slice between the quotes, so its capacity tells where
		// it starts; the member starts at the opening quote before it.
		ns := cap(b) - cap(name) - 1
		dst = append(dst, b[ns:ve]...)
		return ve, nil
	})
	if err != nil {
		return dst, err
	}
	dst = append(dst, '}')
	if len(dst)-start > limit {
		dst = dst[:start+limit]
	}
	return dst, nil
}

// nativeKeep returns the test for routing members of an object that has
// (or lacks) messages, prompt and inputs members.
func nativeKeep(hasMessages, hasPrompt, hasInputs bool) func(name []byte) bool {
	switch {
	case hasMessages:
		return func(name []byte) bool { return inList(name, chatPrompt) }
	case hasPrompt:
		return func(name []byte) bool { return inList(name, completionPrompt) }
	case hasInputs:
		return func(name []byte) bool { return inList(name, nativeRoutingPrompt) }
	}
	return func(name []byte) bool { return !isVolatile(name) }
}

// NativeRoutingMember returns the test that picks, among the top-level
// member names of an object, those in its native routing text. The linter
// uses it to lay out the routing text the way the key does.
func NativeRoutingMember(names []string) func(name string) bool {
	var hasMessages, hasPrompt, hasInputs bool
	for _, n := range names {
		switch n {
		case "messages":
			hasMessages = true
		case "prompt":
			hasPrompt = true
		case "inputs":
			hasInputs = true
		}
	}
	keep := nativeKeep(hasMessages, hasPrompt, hasInputs)
	return func(name string) bool { return keep([]byte(name)) }
}

func inList(name []byte, list []string) bool {
	for _, n := range list {
		if string(name) == n {
			return true
		}
	}
	return false
}
