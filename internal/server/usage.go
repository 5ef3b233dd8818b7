package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/route"
)

// Every answer's prompt and cached token counts are read once, as it
// passes: a plain JSON answer is read whole (it is written in one piece
// anyway) and only its usage object is looked at; an event stream keeps
// its last sseTailBytes, where the final usage chunk is. The counts feed
// prefixgate_prompt_tokens_total / prefixgate_cached_prompt_tokens_total and
// the router (route.Outcome).

// maxUsageBody is the largest plain answer read whole for its usage; a
// larger one is streamed through and its usage is not read.
const maxUsageBody = 4 << 20

// sseTailBytes is how much of an event stream's end is kept. A usage chunk
// is a few hundred bytes; this leaves room for a final chunk with logprobs
// or llama.cpp's timings before it.
const sseTailBytes = 16 << 10

// sseTail keeps the last sseTailBytes of a stream in a ring, so that each
// read costs a copy of itself only; bytes lays it out once at the end.
type sseTail struct {
	ring  []byte // len sseTailBytes
	out   []byte // the laid-out tail, cap sseTailBytes
	total int64  // bytes seen
}

func newSSETail() *sseTail {
	return &sseTail{ring: make([]byte, sseTailBytes), out: make([]byte, 0, sseTailBytes)}
}

func (t *sseTail) reset() { t.total = 0 }

func (t *sseTail) add(p []byte) {
	if len(p) > sseTailBytes {
		t.total += int64(len(p) - sseTailBytes)
		p = p[len(p)-sseTailBytes:]
	}
	at := int(t.total % sseTailBytes)
	n := copy(t.ring[at:], p)
	copy(t.ring, p[n:])
	t.total += int64(len(p))
}

// bytes returns the tail in order and whether it is the whole stream.
func (t *sseTail) bytes() ([]byte, bool) {
	if t.total <= sseTailBytes {
		return t.ring[:t.total], true
	}
	at := int(t.total % sseTailBytes)
	t.out = append(append(t.out[:0], t.ring[at:]...), t.ring[:at]...)
	return t.out, false
}

var tailBuffers = sync.Pool{New: func() any { return newSSETail() }}

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
		if _, werr := w.Write(body[:n]); err == nil {
			err = werr
		}
		if err == nil {
			x.usage = x.b.ParseUsage(body)
			x.answer = answerBlocks(x.info, body)
		}
		if cap(*bp) > maxUsageBody/4 {
			*bp = nil // do not pin rare large buffers
		}
		return err
	}
	if !ok {
		return copyStream(w, x.resp.Body, stream)
	}
	var tail *sseTail
	if stream {
		tail = tailBuffers.Get().(*sseTail)
		tail.reset()
		defer tailBuffers.Put(tail)
	}
	err := copyStreamTail(w, x.resp.Body, stream, tail)
	if err == nil && tail != nil {
		x.usage = x.b.StreamUsage(tail.bytes())
	}
	return err
}

// noteEvent reads the usage of one stream event the Connect streams
// forward, if it carries one; the last one that does wins.
func (x *exchange) noteEvent(data []byte) {
	if x.b == nil || (!bytes.Contains(data, []byte(`"usage"`)) && !bytes.Contains(data, []byte(`"meta_info"`))) {
		return
	}
	if u := x.b.ParseUsage(data); u.PromptTokens >= 0 || u.CachedTokens >= 0 {
		x.usage = u
	}
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
