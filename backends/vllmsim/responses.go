package vllmsim

import (
	"bytes"
	"cmp"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultResponsesStoreSize is how many responses a replica keeps for
// previous_response_id and GET /v1/responses/{id} when Config sets none.
const DefaultResponsesStoreSize = 4096

// storedResponse is one response a replica keeps.
type storedResponse struct {
	id string
	// instructions are those in effect: the request's, else inherited.
	instructions string
	history      []ChatMessage  // the conversation so far, output included, instructions excluded
	object       map[string]any // what GET answers
	cancel       func() bool    // set while a background response runs
}

// responseStore keeps the most recently used responses, up to max.
type responseStore struct {
	mu  sync.Mutex
	max int
	ll  *list.List // of *storedResponse, most recent first
	m   map[string]*list.Element
}

func newResponseStore(max int) *responseStore {
	return &responseStore{max: max, ll: list.New(), m: make(map[string]*list.Element)}
}

// get returns a copy of the stored response id, marking it recently used.
func (s *responseStore) get(id string) (storedResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		return storedResponse{}, false
	}
	s.ll.MoveToFront(e)
	return *e.Value.(*storedResponse), true
}

// put stores or replaces a response, evicting the least recently used
// beyond max.
func (s *responseStore) put(sr storedResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[sr.id]; ok {
		*e.Value.(*storedResponse) = sr
		s.ll.MoveToFront(e)
		return
	}
	s.m[sr.id] = s.ll.PushFront(&sr)
	for s.ll.Len() > s.max {
		last := s.ll.Back()
		s.ll.Remove(last)
		delete(s.m, last.Value.(*storedResponse).id)
	}
}

// reset forgets every stored response, as a crashed process does.
func (s *responseStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ll.Init()
	clear(s.m)
}

// len returns how many responses are stored.
func (s *responseStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ll.Len()
}

type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	Background         bool            `json:"background"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Tools              json.RawMessage `json:"tools"`
	Metadata           json.RawMessage `json:"metadata"`
	CacheSalt          string          `json:"cache_salt"`
}

func (q *responsesRequest) store() bool { return q.Store == nil || *q.Store }

// responseItem is one item of a Responses input.
type responseItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// responsesInput parses input: a string (one user message) or an array of
// items, each a message or a function call or its output.
func responsesInput(raw json.RawMessage) ([]ChatMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("input: field required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []ChatMessage{{Role: "user", Content: s}}, nil
	}
	var items []responseItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New("input: must be a string or an array of input items")
	}
	if len(items) == 0 {
		return nil, errors.New("input: must not be an empty array")
	}
	var msgs []ChatMessage
	for i, it := range items {
		switch {
		case it.Type == "function_call":
			msgs = append(msgs, ChatMessage{Role: "assistant", Content: it.Name + "(" + it.Arguments + ")"})
		case it.Type == "function_call_output":
			out, err := partsText(it.Output, "input_text", "output_text", "text")
			if err != nil {
				return nil, fmt.Errorf("input[%d].output: %v", i, err)
			}
			msgs = append(msgs, ChatMessage{Role: "tool", Content: out})
		case it.Type == "reasoning":
		case it.Type == "" || it.Type == "message":
			if it.Role == "" {
				return nil, fmt.Errorf("input[%d].role: field required", i)
			}
			text, err := partsText(it.Content, "input_text", "output_text", "text")
			if err != nil {
				return nil, fmt.Errorf("input[%d].content: %v", i, err)
			}
			msgs = append(msgs, ChatMessage{Role: it.Role, Content: text})
		default:
			return nil, fmt.Errorf("input[%d].type: unsupported item type %q", i, it.Type)
		}
	}
	return msgs, nil
}

// partsText returns a content's text: a string, or the parts of the given
// types joined by newlines.
func partsText(raw json.RawMessage, types ...string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("must be a string or an array of content parts")
	}
	var texts []string
	for _, p := range parts {
		for _, t := range types {
			if p.Type == t {
				texts = append(texts, p.Text)
			}
		}
	}
	return strings.Join(texts, "\n"), nil
}

// preamble is the system text a request puts before its conversation:
// its instructions, then its tools as compact JSON.
func preamble(instructions string, tools json.RawMessage) []ChatMessage {
	var msgs []ChatMessage
	if instructions != "" {
		msgs = append(msgs, ChatMessage{Role: "system", Content: instructions})
	}
	if len(tools) > 0 && string(tools) != "null" && string(tools) != "[]" {
		var b bytes.Buffer
		if json.Compact(&b, tools) == nil {
			msgs = append(msgs, ChatMessage{Role: "system", Content: "Tools: " + b.String()})
		}
	}
	return msgs
}

// writeNotFoundResponse answers an id the store does not hold, as vLLM does.
func writeNotFoundResponse(w http.ResponseWriter, id string) {
	writeErrorType(w, http.StatusNotFound, "invalid_request_error", fmt.Sprintf("Response with id '%s' not found.", id))
}

// responseCall is one Responses request being answered.
type responseCall struct {
	q       responsesRequest
	id      string
	msgID   string
	created int64
	model   string
	// instructions are the request's, or when it sets none its
	// predecessor's, which thus stay at the head of the prompt.
	instructions string
	history      []ChatMessage // conversation without the output
}

func (r *Replica) handleResponses(w http.ResponseWriter, req *http.Request) {
	var q responsesRequest
	if !readJSON(w, req, &q) {
		return
	}
	call, g, ok := r.prepareResponse(w, q)
	if !ok {
		return
	}
	if q.Background {
		r.respondInBackground(w, call, g)
		return
	}
	run, ok := r.begin(w, req, g)
	if !ok {
		return
	}
	if q.Stream {
		r.streamResponse(w, req, call, run)
		return
	}
	done, ok := r.finish(w, req, run)
	if !ok {
		return
	}
	obj := call.object("completed", &done)
	r.keep(call, done, obj)
	writeJSON(w, http.StatusOK, obj)
}

// prepareResponse checks a Responses request and builds its prompt from
// the stored predecessor's conversation and the new input.
func (r *Replica) prepareResponse(w http.ResponseWriter, q responsesRequest) (*responseCall, genRequest, bool) {
	input, err := responsesInput(q.Input)
	if err == nil && q.Background && !q.store() {
		err = errors.New("background: requires store to be true")
	}
	if err == nil && q.Background && q.Stream {
		err = errors.New("background: vllmsim does not stream background responses")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, genRequest{}, false
	}
	call := &responseCall{q: q, id: r.newUnderscoreID("resp"), msgID: r.newUnderscoreID("msg"),
		created: time.Now().Unix(), model: cmp.Or(q.Model, r.cfg.Model)}
	if q.PreviousResponseID != nil {
		prev, ok := r.responses.get(*q.PreviousResponseID)
		if !ok {
			writeNotFoundResponse(w, *q.PreviousResponseID)
			return nil, genRequest{}, false
		}
		call.history = append(call.history, prev.history...)
		call.instructions = prev.instructions
	}
	call.history = append(call.history, input...)
	if q.Instructions != nil {
		call.instructions = *q.Instructions
	}
	msgs := append(preamble(call.instructions, q.Tools), call.history...)
	g := genRequest{model: q.Model, prompt: Tokenize(RenderChat(msgs)), maxTokens: q.MaxOutputTokens,
		maxTokensName: "max_output_tokens", cacheSalt: q.CacheSalt, stream: q.Stream}
	return call, g, true
}

// keep stores a finished response if the request asked for it.
func (r *Replica) keep(call *responseCall, done Event, obj map[string]any) {
	if !call.q.store() {
		return
	}
	history := append(call.history[:len(call.history):len(call.history)],
		ChatMessage{Role: "assistant", Content: OutputText(0, done.OutputTokens)})
	r.responses.put(storedResponse{id: call.id, instructions: call.instructions, history: history, object: obj})
}

// object is the response as the Responses API shows it; done is nil while
// it has no output.
func (c *responseCall) object(status string, done *Event) map[string]any {
	output, u := []any{}, any(nil)
	if done != nil {
		output = []any{c.message("completed", OutputText(0, done.OutputTokens))}
		u = map[string]any{
			"input_tokens":          done.PromptTokens,
			"input_tokens_details":  map[string]int{"cached_tokens": done.CachedTokens},
			"output_tokens":         done.OutputTokens,
			"output_tokens_details": map[string]int{"reasoning_tokens": 0},
			"total_tokens":          done.PromptTokens + done.OutputTokens,
		}
	}
	tools := c.q.Tools
	if len(tools) == 0 || string(tools) == "null" {
		tools = json.RawMessage("[]")
	}
	return map[string]any{
		"id": c.id, "object": "response", "created_at": c.created, "status": status, "model": c.model,
		"instructions": c.q.Instructions, "output": output, "usage": u,
		"previous_response_id": c.q.PreviousResponseID, "store": c.q.store(), "background": c.q.Background,
		"max_output_tokens": c.q.MaxOutputTokens, "tools": tools, "tool_choice": "auto",
		"parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0, "truncation": "disabled",
		"text": map[string]any{"format": map[string]string{"type": "text"}}, "metadata": c.q.Metadata,
		"error": nil, "incomplete_details": nil, "user": nil, "reasoning": nil,
	}
}

// message is the response's one output item.
func (c *responseCall) message(status, text string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = []any{outputTextPart(text)}
	}
	return map[string]any{"type": "message", "id": c.msgID, "status": status, "role": "assistant", "content": content}
}

func outputTextPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

// sseWriter writes named server-sent events ("event: T\ndata: {...}").
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	seq int
	// numbered adds sequence_number to each event (the Responses API).
	numbered bool
}

func newSSEWriter(w http.ResponseWriter, numbered bool) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w), numbered: numbered}
}

// send writes one event of type typ; false when the client is gone.
func (s *sseWriter) send(typ string, payload map[string]any) bool {
	payload["type"] = typ
	if s.numbered {
		payload["sequence_number"] = s.seq
		s.seq++
	}
	b, _ := json.Marshal(payload)
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// streamResponse writes the Responses event stream of one begun request.
func (r *Replica) streamResponse(w http.ResponseWriter, req *http.Request, call *responseCall, run running) {
	s := newSSEWriter(w, true)
	at := map[string]any{"item_id": call.msgID, "output_index": 0, "content_index": 0}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range at {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	sent := 0
	emit := func(upto int) bool {
		if upto <= sent {
			return true
		}
		ok := s.send("response.output_text.delta", with("delta", OutputText(sent, upto), "logprobs", []any{}))
		sent = upto
		return ok
	}
	ok := s.send("response.created", map[string]any{"response": call.object("in_progress", nil)}) &&
		s.send("response.in_progress", map[string]any{"response": call.object("in_progress", nil)}) &&
		s.send("response.output_item.added", map[string]any{"output_index": 0, "item": call.message("in_progress", "")}) &&
		s.send("response.content_part.added", with("part", outputTextPart(""))) && emit(1)
	if !ok {
		r.cancel(run.id)
		return
	}
	done, ok := r.streamUntilDone(req.Context(), emit, run)
	if !ok || !emit(done.OutputTokens) {
		return
	}
	text := OutputText(0, done.OutputTokens)
	obj := call.object("completed", &done)
	r.keep(call, done, obj)
	_ = s.send("response.output_text.done", with("text", text, "logprobs", []any{})) &&
		s.send("response.content_part.done", with("part", outputTextPart(text))) &&
		s.send("response.output_item.done", map[string]any{"output_index": 0, "item": call.message("completed", text)}) &&
		s.send("response.completed", map[string]any{"response": obj})
}

// respondInBackground queues a request and answers at once with the
// response "queued"; it is stored, and completes or is cancelled later.
func (r *Replica) respondInBackground(w http.ResponseWriter, call *responseCall, g genRequest) {
	sub, ok := r.admit(w, g)
	if !ok {
		return
	}
	id, wt, crashCh, ok := r.submitOrFail(w, writeError, sub)
	if !ok {
		return
	}
	// claim ends the response once: the first of completion and the
	// client's cancel wins.
	stop := make(chan struct{})
	var once sync.Once
	claim := func() bool {
		won := false
		once.Do(func() { close(stop); r.cancel(id); won = true })
		return won
	}
	obj := call.object("queued", nil)
	r.responses.put(storedResponse{id: call.id, instructions: call.instructions, history: call.history, object: obj, cancel: claim})
	go func() {
		select {
		case done := <-wt.done:
			if claim() {
				r.keep(call, done, call.object("completed", &done))
			}
		case <-stop:
		case <-crashCh:
		case <-r.stop: // the replica closed
		}
	}()
	writeJSON(w, http.StatusOK, obj)
}

func (r *Replica) handleGetResponse(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	sr, ok := r.responses.get(id)
	if !ok {
		writeNotFoundResponse(w, id)
		return
	}
	writeJSON(w, http.StatusOK, sr.object)
}

func (r *Replica) handleCancelResponse(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	sr, ok := r.responses.get(id)
	if !ok {
		writeNotFoundResponse(w, id)
		return
	}
	if sr.cancel == nil || sr.object["status"] != "queued" || !sr.cancel() {
		writeErrorType(w, http.StatusBadRequest, "invalid_request_error", "Cannot cancel a synchronous response.")
		return
	}
	obj := make(map[string]any, len(sr.object))
	for k, v := range sr.object {
		obj[k] = v
	}
	obj["status"] = "cancelled"
	sr.object, sr.cancel = obj, nil
	r.responses.put(sr)
	writeJSON(w, http.StatusOK, obj)
}
