package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// Every answer is read once, as it passes: a plain JSON answer is read
// whole (it is written in one piece anyway) and only its usage object and
// first choice's text are looked at; an event stream is split into events
// as it is relayed and each event's JSON is walked once (answerStream), for
// its usage and, in a chat answer, its text. The counts feed
// prefixgate_prompt_tokens_total / prefixgate_cached_prompt_tokens_total and
// the router (route.Outcome); the text becomes the answer's blocks, which
// the prefix index learns.

// maxUsageBody is the largest plain answer read whole for its usage; a
// larger one is streamed through and its usage is not read.
const maxUsageBody = 4 << 20

// maxAnswerBytes bounds the text of a streamed chat answer kept for the
// prefix index: a longer answer is relayed whole but not learned (its
// blocks past the limit are unknown, and its prompt was learned at the
// pick). 256 KiB is far above what a max_tokens of a few thousand writes.
const maxAnswerBytes = 256 << 10

// maxEventBytes bounds one event line a REST stream relay holds across
// reads; a longer event is relayed but not read.
const maxEventBytes = 1 << 20

// plainBuffers recycles the buffers plain answers are read into.
var plainBuffers = sync.Pool{New: func() any { return new([]byte) }}

// relay writes the backend's answer to w (headers already written) and
// reads its usage into x.usage. stream is true for event streams and bodies
// of unknown length, which are flushed as they come.
func (x *exchange) relay(w http.ResponseWriter, stream bool) error {
	ok := x.resp.StatusCode/100 == 2 && x.b != nil
	if !stream && ok && x.resp.ContentLength <= maxUsageBody {
		bp := plainBuffers.Get().(*[]byte)
		defer plainBuffers.Put(bp)
		if int64(cap(*bp)) < x.resp.ContentLength {
			*bp = make([]byte, x.resp.ContentLength)
		}
		body := (*bp)[:x.resp.ContentLength]
		n, err := io.ReadFull(x.resp.Body, body)
		if err == nil && x.learnID {
			x.learnResponseID(body) // before the client can name it
		}
		if _, werr := w.Write(body[:n]); err == nil {
			err = werr
		}
		if err == nil {
			x.usage = x.b.ParseUsage(body)
			if x.s.gate.Enabled() {
				x.outTokens = plainOutputTokens(body)
			}
			x.answer = answerBlocks(x.info, body)
		}
		if cap(*bp) > maxUsageBody/4 {
			*bp = nil // do not pin rare large buffers
		}
		return err
	}
	if !ok || !stream {
		return copyStream(w, x.resp.Body, stream, nil)
	}
	as := x.readStream()
	defer as.put()
	err := copyStream(w, x.resp.Body, true, as)
	if err == nil {
		as.finish()
	}
	return err
}

// textPath is where mode's answers carry their text inside the first
// choice, in a plain answer or (stream) an event; "" when they have none.
func textPath(mode normalize.Mode, stream bool) string {
	switch {
	case mode == normalize.ModeCompletion:
		return "text"
	case mode == normalize.ModeChat && stream:
		return "delta.content"
	case mode == normalize.ModeChat:
		return "message.content"
	}
	return ""
}

// answerStream reads a streamed answer once, event by event, as it is
// relayed: each event's JSON is walked once (parseAnswer; modeEvent for
// Responses and Messages) for the first choice's text and finish reason
// and the usage members. The usage goes to x.usage (the last event that
// states one wins); the text of choice 0 of a chat answer (of the
// message, in Responses and Messages) is kept, up to maxAnswerBytes, so
// that finish hands the router the answer's blocks as the plain relay
// does.
type answerStream struct {
	x        *exchange
	textPath string
	mode     normalize.Mode
	learn    bool   // chat, Responses or Messages with blocks: keep the text
	text     []byte // choice 0's text so far
	over     bool   // the text passed maxAnswerBytes, or cannot be known
	// part is the text part (Responses) or content block (Messages) the
	// text is in, -1 before the first; ended says the stream's last
	// event came (response.completed or .incomplete, message_stop).
	part  int64
	ended bool
	// line is the event line begun in an earlier read (REST relay); skip
	// says the line in progress passed maxEventBytes and is not read.
	line []byte
	skip bool
	// begun says the answer's first bytes came (exchange.firstByte ran).
	begun bool
	// deltas counts events that carried text; usage says an event stated
	// the output tokens. Until one does, x.outTokens is deltas: a streamed
	// token per event, as vLLM and SGLang send them.
	deltas int
	usage  bool
}

var answerStreams = sync.Pool{New: func() any { return new(answerStream) }}

// readStream starts reading x's streamed answer; put returns it.
func (x *exchange) readStream() *answerStream {
	as := answerStreams.Get().(*answerStream)
	as.x, as.textPath, as.mode = x, textPath(x.info.Mode, true), x.info.Mode
	as.learn = x.b != nil && len(x.info.Blocks) > 0 && learnsAnswers(x.info.Mode)
	as.text, as.line, as.over, as.skip = as.text[:0], as.line[:0], false, false
	as.part, as.ended, as.begun = -1, false, false
	as.deltas, as.usage = 0, false
	return as
}

func (as *answerStream) put() {
	as.x = nil
	if cap(as.text) > 64<<10 {
		as.text = nil // do not pin rare long answers
	}
	if cap(as.line) > 64<<10 {
		as.line = nil
	}
	answerStreams.Put(as)
}

// event reads one event's JSON data and returns what it says.
func (as *answerStream) event(data []byte) answer {
	if as.mode == normalize.ModeResponses || as.mode == normalize.ModeMessages {
		as.modeEvent(data)
		return answer{}
	}
	a := parseAnswer(data, as.textPath)
	if as.x.b != nil && (a.usage.IsObject() || a.metaInfo.IsObject()) {
		if u := as.x.b.EventUsage([]byte(a.usage.Raw), []byte(a.metaInfo.Raw)); u.PromptTokens >= 0 || u.CachedTokens >= 0 {
			as.x.usage = u
		}
		if n := outputTokens(a.usage); n > 0 {
			as.x.outTokens, as.usage = n, true
		} else if n := outputTokens(a.metaInfo); n > 0 {
			as.x.outTokens, as.usage = n, true
		}
	}
	if a.text != "" && !as.usage {
		as.deltas++
		as.x.outTokens = as.deltas
	}
	if as.learn && !as.over && a.index == 0 {
		if len(as.text)+len(a.text) > maxAnswerBytes {
			as.over, as.text = true, as.text[:0]
		} else {
			as.text = append(as.text, a.text...)
		}
	}
	return a
}

// finish hands the answer's blocks to the exchange once the stream has
// ended well; an answer longer than maxAnswerBytes is not learned, nor a
// Responses or Messages answer without its last event or without text.
func (as *answerStream) finish() {
	if !as.learn || as.over {
		return
	}
	if as.mode != normalize.ModeChat && (!as.ended || as.part < 0) {
		return
	}
	as.x.answer = as.x.info.AnswerBlocks(as.text)
}

// feed reads the relayed bytes p of a server-sent event stream: complete
// lines are read as they arrive, a line cut by the read is kept (up to
// maxEventBytes) until its end comes.
func (as *answerStream) feed(p []byte) {
	if !as.begun && len(p) > 0 {
		as.begun = true
		as.x.firstByte()
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !as.skip && len(as.line)+len(p) > maxEventBytes {
				as.skip, as.line = true, as.line[:0]
			}
			if !as.skip {
				as.line = append(as.line, p...)
			}
			return
		}
		switch {
		case as.skip:
		case len(as.line) > 0:
			if len(as.line)+i <= maxEventBytes {
				as.line = append(as.line, p[:i]...)
				as.eventLine(as.line)
			}
		default:
			as.eventLine(p[:i])
		}
		as.line, as.skip = as.line[:0], false
		p = p[i+1:]
	}
}

// eventLine reads one line of an event stream: a data line's JSON, if any.
func (as *answerStream) eventLine(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return // [DONE], or nothing an answer reads
	}
	if as.x.learnID {
		as.x.learnCreatedEvent(data)
	}
	if !as.learn && !bytes.Contains(data, []byte(`"usage"`)) && !bytes.Contains(data, []byte(`"meta_info"`)) {
		return // no text wanted and no usage here: not worth a walk
	}
	as.event(data)
}

// countUsage adds one answer's tokens to the per-backend usage counters.
// Only answers that reported both figures count, so that
// cached/prompt is a true hit rate.
func (s *Server) countUsage(backend string, u backends.Usage) {
	if u.PromptTokens < 0 || u.CachedTokens < 0 {
		return
	}
	s.metrics.promptTokens.WithLabelValues(backend).Add(float64(u.PromptTokens))
	s.metrics.cachedPromptTokens.WithLabelValues(backend).Add(float64(u.CachedTokens))
}

// publishEngine sets prefixgate_backend_cache_tokens for b. A backend
// whose engine changed (detected, or renamed on reload) loses its old
// series first.
func (s *Server) publishEngine(b *backends.Backend) {
	e := b.Engine().String()
	s.enginesMu.Lock()
	if prev, ok := s.engines[b.Name]; ok && prev != e {
		s.metrics.backendCacheTokens.DeleteLabelValues(b.Name, prev)
	}
	if s.engines == nil {
		s.engines = map[string]string{}
	}
	s.engines[b.Name] = e
	s.enginesMu.Unlock()
	s.metrics.backendCacheTokens.WithLabelValues(b.Name, e).Set(float64(b.CacheTokens()))
}

// failedOutcome is the outcome of a request that got no answer.
func failedOutcome(err error) route.Outcome {
	if err == nil {
		err = fmt.Errorf("no answer")
	}
	return route.Outcome{Err: err, PromptTokens: -1, CachedTokens: -1}
}

// firstByte tells the router that x's answer has begun: the prefill work
// charged at the pick is done (a stream's first bytes come after the
// engine's first token), so the router and flow control stop counting it
// as queued on the backend while the answer streams.
func (x *exchange) firstByte() {
	if x.d != nil {
		x.d.Report(route.Outcome{FirstByte: true})
	}
	if x.s != nil {
		x.s.gate.Wake()
	}
}
