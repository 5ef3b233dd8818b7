package server

import (
	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/normalize"
)

// The Responses and Messages APIs carry an answer's text in shapes of
// their own. What the prefix index learns is the text as the next turn
// sends it back: in Responses the first output item, when it is the
// assistant's message, whose output_text parts normalize joins with '\n'
// (the items after it are records of their own, so they do not change
// the blocks through it); in Messages the assistant message, whose text
// blocks are joined the same way. An answer whose message holds anything
// else (a refusal, a tool_use or thinking block) is not learned: its
// record in the next turn holds that part's JSON, which the answer does
// not give exactly.

// modeAnswerText returns the text of a plain Responses or Messages answer
// as the next turn carries it, and whether there is one to learn.
func modeAnswerText(mode normalize.Mode, body []byte) ([]byte, bool) {
	var parts gjson.Result
	partType := "text"
	if mode == normalize.ModeResponses {
		item := gjson.GetBytes(body, "output.0")
		if item.Get("type").Str != "message" || item.Get("role").Str != "assistant" {
			return nil, false
		}
		parts, partType = item.Get("content"), "output_text"
	} else {
		parts = gjson.GetBytes(body, "content")
	}
	if !parts.IsArray() {
		return nil, false
	}
	var text []byte
	ok, n := true, 0
	parts.ForEach(func(_, p gjson.Result) bool {
		t := p.Get("text")
		if p.Get("type").Str != partType || t.Type != gjson.String {
			ok = false
			return false
		}
		if n > 0 {
			text = append(text, '\n')
		}
		text, n = append(text, t.Str...), n+1
		return len(text) <= maxAnswerBytes
	})
	return text, ok && len(text) <= maxAnswerBytes
}

// modeEvent is what one Responses or Messages stream event says, from one
// walk of its top level.
type modeEvent struct {
	typ string
	// index is a Messages content block's index; output and content are
	// a Responses event's output_index and content_index.
	index, output, content int64
	// delta is the event's delta (a string in Responses, an object in
	// Messages); usage its top-level usage (Messages' message_delta);
	// wrapper the response (Responses) or message (Messages) it carries;
	// part the content part, block or item it starts.
	delta, usage, wrapper, part gjson.Result
}

func parseModeEvent(data []byte) modeEvent {
	var ev modeEvent
	gjson.ParseBytes(data).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "type":
			ev.typ = v.Str
		case "index":
			ev.index = v.Int()
		case "output_index":
			ev.output = v.Int()
		case "content_index":
			ev.content = v.Int()
		case "delta":
			ev.delta = v
		case "usage":
			ev.usage = v
		case "response", "message":
			ev.wrapper = v
		case "part", "content_block", "item":
			ev.part = v
		}
		return true
	})
	return ev
}

// modeEvent reads one event of a streamed Responses or Messages answer:
// its usage (the last event that states one wins) and, when learning,
// the text of the answer's message.
func (as *answerStream) modeEvent(data []byte) {
	ev := parseModeEvent(data)
	usage := ev.usage
	switch ev.typ {
	case "response.completed", "response.incomplete", "message_stop":
		as.ended = true
	}
	if !usage.IsObject() && ev.wrapper.IsObject() {
		usage = ev.wrapper.Get("usage")
	}
	if as.x.b != nil && usage.IsObject() {
		if u := as.x.b.EventUsage([]byte(usage.Raw), nil); u.PromptTokens >= 0 || u.CachedTokens >= 0 {
			as.x.usage = u
		}
	}
	if !as.learn || as.over {
		return
	}
	if as.mode == normalize.ModeResponses {
		as.responsesText(ev)
	} else {
		as.messagesText(ev)
	}
}

// responsesText follows the text of the first output item, which must be
// a message whose parts are output_text.
func (as *answerStream) responsesText(ev modeEvent) {
	if ev.output != 0 {
		return // a later item: a record of its own
	}
	switch ev.typ {
	case "response.output_item.added":
		if ev.part.Get("type").Str != "message" {
			as.over = true
		}
	case "response.content_part.added":
		if ev.part.Get("type").Str != "output_text" {
			as.over = true
			return
		}
		as.startPart(ev.content)
	case "response.output_text.delta":
		as.startPart(ev.content)
		as.appendText(ev.delta.Str)
	case "response.refusal.delta":
		as.over = true
	}
}

// messagesText follows the text blocks of a Messages answer.
func (as *answerStream) messagesText(ev modeEvent) {
	switch ev.typ {
	case "content_block_start":
		if ev.part.Get("type").Str != "text" {
			as.over = true
			return
		}
		as.startPart(ev.index)
		as.appendText(ev.part.Get("text").Str)
	case "content_block_delta":
		if ev.delta.Get("type").Str != "text_delta" {
			as.over = true
			return
		}
		as.startPart(ev.index)
		as.appendText(ev.delta.Get("text").Str)
	}
}

// startPart moves the text to part i: the next one starts after a '\n',
// as normalize joins a message's text parts; a part skipped (one that is
// not text) or gone back to means the text cannot be known.
func (as *answerStream) startPart(i int64) {
	switch {
	case i == as.part:
	case i == as.part+1:
		if as.part >= 0 {
			as.appendText("\n")
		}
		as.part = i
	default:
		as.over = true
	}
}

// appendText adds s to the answer's text, up to maxAnswerBytes.
func (as *answerStream) appendText(s string) {
	if as.over {
		return
	}
	if len(as.text)+len(s) > maxAnswerBytes {
		as.over, as.text = true, as.text[:0]
		return
	}
	as.text = append(as.text, s...)
}
