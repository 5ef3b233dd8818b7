package normalize

import "fmt"

// Mode selects the request schema: how the top level is ordered and how the
// routing text is taken.
type Mode int

const (
	// ModeAuto detects the schema from the body (docs/normalize.md, "Schema
	// detection"): chat or messages if the top-level object has
	// "messages", completion if it has "prompt", native if it has
	// "inputs", responses or pooling if it has "input", pooling if it has
	// "query" and "documents" or "text_1" and "text_2". A body that matches none
	// is put in plain JCS order and keyed like a native body.
	ModeAuto Mode = iota
	// ModeChat is an OpenAI chat completions body.
	ModeChat
	// ModeCompletion is an OpenAI completions body.
	ModeCompletion
	// ModeNative is a native {inputs, parameters} body, keyed on the bytes
	// of its routing members (docs/normalize.md).
	ModeNative
	// ModeResponses is an OpenAI Responses API body: keyed on its
	// instructions, tools and input items but the final one;
	// previous_response_id is state, not prompt text.
	ModeResponses
	// ModeMessages is an Anthropic Messages API body: keyed on its system
	// prompt, tools and messages but the final one; cache_control members
	// are left out of the routing text, kept in the body.
	ModeMessages
	// ModePooling is a pooling body (embeddings, classify, score, rerank):
	// keyed on query, text_1, input, documents and text_2, in that order.
	ModePooling
)

var modeNames = [...]string{"auto", "chat", "completion", "native", "responses", "messages", "pooling"}

// ModeNames lists the names ParseMode accepts, in Mode order.
func ModeNames() []string { return append([]string(nil), modeNames[:]...) }

// ParseMode parses a mode name: "auto", "chat", "completion", "native",
// "responses", "messages" or "pooling".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return ModeAuto, &optionError{code: "invalid-mode", msg: fmt.Sprintf("unknown mode %q (want auto, chat, completion, native, responses, messages or pooling)", s)}
}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int(m))
}
