package server

import (
	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/normalize"
)

// answerBlocks returns what the chosen replica holds once it has answered a
// chat, Responses or Messages request: the prompt's blocks followed by
// those of the generated answer, hashed as the conversation's next turn
// will carry it (an assistant message after this request's messages or
// input items), so the prefix index learns the answer too and the next
// turn's longest match reaches past it. body is a plain (not streamed)
// answer the relay has already read whole for its usage; the text is
// looked up in it, not parsed again. It returns nil when there is nothing
// to learn: no blocks (the policy is not prefix-index), another mode, or
// an answer without text it can learn (see modeAnswerText); in chat, no
// first choice whose message content is a string or null (null: a tool
// call, whose record carries no text).
func answerBlocks(info normalize.RouteInfo, body []byte) []uint64 {
	if len(info.Blocks) == 0 || info.Mode != normalize.ModeChat {
		if len(info.Blocks) > 0 && learnsAnswers(info.Mode) {
			if text, ok := modeAnswerText(info.Mode, body); ok {
				return info.AnswerBlocks(text)
			}
		}
		return nil
	}
	c := gjson.GetBytes(body, "choices.0.message.content")
	switch c.Type {
	case gjson.String:
		return info.AnswerBlocks([]byte(c.Str))
	case gjson.Null:
		if c.Exists() {
			return info.AnswerBlocks(nil)
		}
	}
	return nil
}

// learnsAnswers says whether the answers of mode's requests are learned.
func learnsAnswers(mode normalize.Mode) bool {
	return mode == normalize.ModeChat || mode == normalize.ModeResponses || mode == normalize.ModeMessages
}
