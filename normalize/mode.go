package normalize

import "fmt"

// Mode selects the request schema: how the top level is ordered and how the
// routing text is taken.
type Mode int

const (
	// ModeAuto detects the schema from the body: chat if the top-level object
	// has "messages", completion if it has "prompt", native if it has
	// "inputs". A body that matches none is put in plain JCS order and keyed
	// like a native body.
	ModeAuto Mode = iota
	// ModeChat is an OpenAI chat completions body.
	ModeChat
	// ModeCompletion is an OpenAI completions body.
	ModeCompletion
	// ModeNative is a native {inputs, parameters} body, keyed on the bytes
	// of its routing members (docs/normalize.md).
	ModeNative
)

var modeNames = [...]string{"auto", "chat", "completion", "native"}

// ParseMode parses "auto", "chat", "completion" or "native".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return ModeAuto, &optionError{code: "invalid-mode", msg: fmt.Sprintf("unknown mode %q (want auto, chat, completion or native)", s)}
}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int(m))
}
