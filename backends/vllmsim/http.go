package vllmsim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const maxBodyBytes = 32 << 20

// ServeHTTP implements http.Handler: vLLM's OpenAI-compatible surface plus
// /admin/faults, with fault injection.
func (r *Replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("X-Vllmsim-Replica", r.name)
	if req.URL.Path == "/admin/faults" {
		r.handler.ServeHTTP(w, req)
		return
	}
	r.mu.Lock()
	f, crashed, crashCh := r.faults, r.crashed, r.crashCh
	r.mu.Unlock()
	switch {
	case crashed || f.CloseConnection:
		dropConnection(w)
		return
	case f.Hang:
		select {
		case <-req.Context().Done():
		case <-crashCh:
		}
		dropConnection(w)
		return
	}
	if req.Method == http.MethodPost && isGeneration(req.URL.Path) {
		if f.LatencySpikeRate > 0 && r.randFloat() < f.LatencySpikeRate {
			t := time.NewTimer(time.Duration(f.LatencySpike))
			select {
			case <-t.C:
			case <-req.Context().Done():
				t.Stop()
				return
			}
		}
		if f.ErrorRate > 0 && r.randFloat() < f.ErrorRate {
			fail := writeError
			if req.URL.Path == "/v1/messages" {
				fail = writeAnthropicError
			}
			fail(w, http.StatusInternalServerError, "injected fault: internal server error")
			return
		}
	}
	r.handler.ServeHTTP(w, req)
}

// isGeneration reports whether a POST to path runs the engine: the paths
// that faults' error rate and latency spikes apply to.
func isGeneration(path string) bool {
	switch path {
	case "/v1/chat/completions", "/v1/completions", "/invocations", "/v1/responses", "/v1/messages",
		"/v1/embeddings", "/pooling", "/classify", "/score", "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank",
		"/v1/audio/transcriptions", "/v1/audio/translations":
		return true
	}
	return false
}

// dropConnection closes the client's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

func (r *Replica) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", r.pdHandler(r.chat))
	mux.HandleFunc("POST /v1/completions", r.pdHandler(r.completion))
	mux.HandleFunc("POST /kv/fetch", r.handleKVFetch)
	mux.HandleFunc("POST /kv/bootstrap", r.handleBootstrap)
	mux.HandleFunc("POST /invocations", r.handleInvocations)
	mux.HandleFunc("GET /v1/models", r.handleModels)
	mux.HandleFunc("POST /v1/load_lora_adapter", r.handleLoadLoRA)
	mux.HandleFunc("POST /v1/unload_lora_adapter", r.handleUnloadLoRA)
	mux.HandleFunc("POST /v1/responses", r.handleResponses)
	mux.HandleFunc("GET /v1/responses/{id}", r.handleGetResponse)
	mux.HandleFunc("POST /v1/responses/{id}/cancel", r.handleCancelResponse)
	mux.HandleFunc("POST /v1/messages", r.handleMessages)
	mux.HandleFunc("POST /v1/embeddings", r.handleEmbed("embd", "embedding", "embedding"))
	mux.HandleFunc("POST /pooling", r.handleEmbed("pool", "pooling", "data"))
	mux.HandleFunc("POST /classify", r.handleClassify)
	for _, p := range []string{"/score", "/v1/score"} {
		mux.HandleFunc("POST "+p, r.handleScore)
	}
	for _, p := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		mux.HandleFunc("POST "+p, r.handleRerank)
	}
	mux.HandleFunc("POST /v1/audio/transcriptions", r.handleAudio("transcribe"))
	mux.HandleFunc("POST /v1/audio/translations", r.handleAudio("translate"))
	mux.HandleFunc("POST /tokenize", r.handleTokenize)
	mux.HandleFunc("POST /detokenize", r.handleDetokenize)
	mux.HandleFunc("GET /version", handleVersion)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /metrics", r.handleMetrics)
	mux.HandleFunc("GET /admin/faults", r.handleGetFaults)
	mux.HandleFunc("POST /admin/faults", r.handleSetFaults)
	return mux
}

// ---- errors ----

type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    int    `json:"code"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	typ := "BadRequestError"
	switch status {
	case http.StatusNotFound:
		typ = "NotFoundError"
	case http.StatusInternalServerError:
		typ = "InternalServerError"
	}
	writeErrorType(w, status, typ, msg)
}

// writeErrorType answers an error in OpenAI's shape with the given type.
func writeErrorType(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]apiError{"error": {Message: msg, Type: typ, Code: status}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// vLLM's JSON answers state their length (FastAPI's JSONResponse): a
	// router reads a plain answer by it.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func readBody(w http.ResponseWriter, req *http.Request) ([]byte, bool) {
	return readBodyAs(w, req, writeError)
}

func readBodyAs(w http.ResponseWriter, req *http.Request, fail errorWriter) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBodyBytes))
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		fail(w, status, "cannot read request body: "+err.Error())
		return nil, false
	}
	return b, true
}

// readJSONAs is readJSON answering errors with fail.
func readJSONAs(w http.ResponseWriter, req *http.Request, v any, fail errorWriter) bool {
	b, ok := readBodyAs(w, req, fail)
	if !ok {
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		fail(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

// readJSON reads and decodes a JSON body, answering 400 in OpenAI's shape
// when it cannot.
func readJSON(w http.ResponseWriter, req *http.Request, v any) bool {
	b, ok := readBody(w, req)
	return ok && decodeJSON(w, b, v)
}

func writeModelNotFound(w http.ResponseWriter, model string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", model))
}

func decodeJSON(w http.ResponseWriter, b []byte, v any) bool {
	if err := json.Unmarshal(b, v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

// ---- request shapes ----

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	CacheSalt           string         `json:"cache_salt"`
	Priority            int            `json:"priority"`
}

type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	CacheSalt     string          `json:"cache_salt"`
	Priority      int             `json:"priority"`
}

// ---- chat template ----

// RenderChat renders chat messages into prompt text with a Llama-3-style
// template: "<|begin_of_text|>", then per message
// "<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>", then the
// assistant header that starts generation. Conversations sharing their first
// messages share a text prefix, hence a token prefix.
func RenderChat(messages []ChatMessage) string {
	var b strings.Builder
	b.WriteString("<|begin_of_text|>")
	for _, m := range messages {
		b.WriteString("<|start_header_id|>")
		b.WriteString(m.Role)
		b.WriteString("<|end_header_id|>\n\n")
		b.WriteString(m.Content)
		b.WriteString("<|eot_id|>")
	}
	b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	return b.String()
}

// ChatMessage is one message of a chat for RenderChat.
type ChatMessage struct {
	Role    string
	Content string
}

// messageText returns a message content's text: a string, or the "text"
// parts of an array of content parts.
func messageText(raw json.RawMessage) (string, error) {
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
		return "", errors.New("content must be a string or an array of content parts")
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			continue
		}
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func (c *chatRequest) prompt() ([]Token, error) {
	msgs, err := chatMessages(c.Messages)
	if err != nil {
		return nil, err
	}
	return Tokenize(RenderChat(msgs)), nil
}

// chatMessages checks chat messages and returns their roles and texts.
func chatMessages(in []chatMessage) ([]ChatMessage, error) {
	if len(in) == 0 {
		return nil, errors.New("messages: field required and must not be empty")
	}
	msgs := make([]ChatMessage, len(in))
	for i, m := range in {
		if m.Role == "" {
			return nil, fmt.Errorf("messages[%d].role: field required", i)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %v", i, err)
		}
		msgs[i] = ChatMessage{Role: m.Role, Content: text}
	}
	return msgs, nil
}

// completionPrompt parses a completions prompt: a string, an array of one
// string, an array of token ids, or an array of one array of token ids.
func completionPrompt(raw json.RawMessage) ([]Token, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("prompt: field required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return Tokenize(s), nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		if len(ss) != 1 {
			return nil, errors.New("prompt: vllmsim supports exactly one prompt per request")
		}
		return Tokenize(ss[0]), nil
	}
	var ids []uint32
	if err := json.Unmarshal(raw, &ids); err == nil {
		return ids, nil
	}
	var idss [][]uint32
	if err := json.Unmarshal(raw, &idss); err == nil && len(idss) == 1 {
		return idss[0], nil
	}
	return nil, errors.New("prompt: must be a string, an array of one string, or token ids")
}

// ---- generation ----

type apiKind uint8

const (
	kindChat apiKind = iota
	kindCompletion
	kindNative
)

type genRequest struct {
	kind         apiKind
	model        string // as requested ("" = base)
	prompt       []Token
	maxTokens    *int
	cacheSalt    string
	priority     int // vLLM's request priority (scheduling policy "priority")
	stream       bool
	includeUsage bool
	// fail writes an error in the path's shape; nil means OpenAI's.
	fail errorWriter
	// maxTokensName names the output cap in errors; "" means max_tokens.
	maxTokensName string
	// pd is the request's part in a prefill/decode split (pd_http.go).
	pd *pdRequest
}

// errorWriter answers a request with an error in one API's shape.
type errorWriter func(w http.ResponseWriter, status int, msg string)

func (g genRequest) failer() errorWriter {
	if g.fail != nil {
		return g.fail
	}
	return writeError
}

type usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	PromptTokensDetails promptTokensDetails `json:"prompt_tokens_details"`
}

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func usageOf(ev Event) usage {
	return usage{
		PromptTokens:        ev.PromptTokens,
		CompletionTokens:    ev.OutputTokens,
		TotalTokens:         ev.PromptTokens + ev.OutputTokens,
		PromptTokensDetails: promptTokensDetails{CachedTokens: ev.CachedTokens},
	}
}

func (r *Replica) chat(w http.ResponseWriter, req *http.Request, body []byte) {
	var c chatRequest
	if !decodeJSON(w, body, &c) {
		return
	}
	prompt, err := c.prompt()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	mt := c.MaxCompletionTokens
	if mt == nil {
		mt = c.MaxTokens
	}
	r.generate(w, req, genRequest{
		kind: kindChat, model: c.Model, prompt: prompt, maxTokens: mt, cacheSalt: c.CacheSalt, priority: c.Priority,
		stream: c.Stream, includeUsage: c.StreamOptions != nil && c.StreamOptions.IncludeUsage,
	})
}

func (r *Replica) completion(w http.ResponseWriter, req *http.Request, body []byte) {
	var c completionRequest
	if !decodeJSON(w, body, &c) {
		return
	}
	prompt, err := completionPrompt(c.Prompt)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	r.generate(w, req, genRequest{
		kind: kindCompletion, model: c.Model, prompt: prompt, maxTokens: c.MaxTokens, cacheSalt: c.CacheSalt, priority: c.Priority,
		stream: c.Stream, includeUsage: c.StreamOptions != nil && c.StreamOptions.IncludeUsage,
	})
}

// handleInvocations serves POST /invocations: a chat body (has "messages")
// or completion body (has "prompt") is answered as by those endpoints; a
// native body {"inputs": "...", "parameters": {...}} is answered with
// {"generated_text", "details", "usage"}.
func (r *Replica) handleInvocations(w http.ResponseWriter, req *http.Request) {
	b, ok := readBody(w, req)
	if !ok {
		return
	}
	var probe map[string]json.RawMessage
	if !decodeJSON(w, b, &probe) {
		return
	}
	switch {
	case probe["messages"] != nil:
		r.chat(w, req, b)
	case probe["prompt"] != nil:
		r.completion(w, req, b)
	case probe["inputs"] != nil:
		var n struct {
			Model      string `json:"model"`
			Inputs     string `json:"inputs"`
			Parameters struct {
				MaxNewTokens *int   `json:"max_new_tokens"`
				MaxTokens    *int   `json:"max_tokens"`
				AdapterID    string `json:"adapter_id"`
				CacheSalt    string `json:"cache_salt"`
			} `json:"parameters"`
		}
		if !decodeJSON(w, b, &n) {
			return
		}
		if n.Inputs == "" {
			writeError(w, http.StatusBadRequest, "inputs: must be a non-empty string")
			return
		}
		model := n.Model
		if n.Parameters.AdapterID != "" {
			model = n.Parameters.AdapterID
		}
		mt := n.Parameters.MaxNewTokens
		if mt == nil {
			mt = n.Parameters.MaxTokens
		}
		r.generate(w, req, genRequest{
			kind: kindNative, model: model, prompt: Tokenize(n.Inputs), maxTokens: mt,
			cacheSalt: n.Parameters.CacheSalt,
		})
	default:
		writeError(w, http.StatusBadRequest, `body must have "messages", "prompt" or "inputs"`)
	}
}

// fillerWords are the simulated model's vocabulary.
var fillerWords = strings.Fields(`the quick brown fox jumps over a lazy dog while
prefix caches warm and batches of tokens flow through every layer of this model so
routers learn where each request should go next`)

// OutputText returns the deterministic text of output tokens [from, to).
func OutputText(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(fillerWords[i%len(fillerWords)])
	}
	return b.String()
}

// respIDPrefix is the id prefix of each API's answers.
var respIDPrefix = map[apiKind]string{kindChat: "chatcmpl", kindCompletion: "cmpl", kindNative: "cmpl"}

// generate runs one request through the engine and answers it, whole or as
// a stream.
func (r *Replica) generate(w http.ResponseWriter, req *http.Request, g genRequest) {
	g.pd = pdFrom(req.Context())
	run, ok := r.begin(w, req, g)
	if !ok {
		return
	}
	a := answer{g: g, respID: r.newID(respIDPrefix[g.kind]), model: cmp.Or(g.model, r.cfg.Model), created: time.Now().Unix()}
	if g.stream && g.kind != kindNative {
		r.stream(w, req, a, run)
		return
	}
	if done, ok := r.await(w, req, run.id, run.wt.done, run.crashCh); ok {
		writeWhole(w, a, done)
	}
}

// running is a request submitted to the engine whose first token exists.
type running struct {
	id      RequestID
	wt      *waiter
	crashCh <-chan struct{}
	first   Event
}

// begin admits and submits a request and waits for its first token,
// answering the client in the path's error shape when that fails.
func (r *Replica) begin(w http.ResponseWriter, req *http.Request, g genRequest) (running, bool) {
	sub, ok := r.admit(w, g)
	if !ok {
		return running{}, false
	}
	id, wt, crashCh, ok := r.submitOrFail(w, g.failer(), sub)
	if !ok {
		return running{}, false
	}
	first, ok := r.await(w, req, id, wt.first, crashCh)
	if !ok {
		return running{}, false
	}
	return running{id: id, wt: wt, crashCh: crashCh, first: first}, true
}

// submitOrFail submits sub, answering the client when the engine refuses it.
func (r *Replica) submitOrFail(w http.ResponseWriter, fail errorWriter, sub Request) (RequestID, *waiter, <-chan struct{}, bool) {
	id, wt, crashCh, err := r.submit(sub)
	switch {
	case errors.Is(err, errCrashed):
		dropConnection(w)
		return 0, nil, nil, false
	case errors.Is(err, ErrTooLong):
		fail(w, http.StatusBadRequest, fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			r.cfg.Engine.MaxModelLen, len(sub.Prompt)+sub.MaxTokens, len(sub.Prompt), sub.MaxTokens))
		return 0, nil, nil, false
	case err != nil:
		fail(w, http.StatusBadRequest, err.Error())
		return 0, nil, nil, false
	}
	return id, wt, crashCh, true
}

// finish waits until a begun request is done.
func (r *Replica) finish(w http.ResponseWriter, req *http.Request, run running) (Event, bool) {
	return r.await(w, req, run.id, run.wt.done, run.crashCh)
}

// admit checks a request's model, output cap and prompt, answering the
// client when one is wrong, and returns the engine's request.
func (r *Replica) admit(w http.ResponseWriter, g genRequest) (Request, bool) {
	fail := g.failer()
	adapterName, ok := r.resolveModel(g.model)
	if !ok {
		fail(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", g.model))
		return Request{}, false
	}
	maxTokens := r.cfg.DefaultMaxTokens
	if g.maxTokens != nil {
		if *g.maxTokens < 1 {
			fail(w, http.StatusBadRequest, cmp.Or(g.maxTokensName, "max_tokens")+" must be at least 1")
			return Request{}, false
		}
		maxTokens = *g.maxTokens
	}
	if len(g.prompt) == 0 {
		fail(w, http.StatusBadRequest, "prompt must not be empty")
		return Request{}, false
	}
	if g.priority != 0 && r.cfg.Engine.SchedulingPolicy != SchedulingPriority {
		// vLLM refuses a priority its scheduler would ignore.
		fail(w, http.StatusBadRequest, fmt.Sprintf("Got priority %d but Priority scheduling is not enabled.", g.priority))
		return Request{}, false
	}
	sub := Request{Prompt: g.prompt, Adapter: adapterName, CacheSalt: g.cacheSalt, MaxTokens: maxTokens, Priority: g.priority}
	g.pd.engineFields(&sub)
	return sub, true
}

// await waits for the engine's event on ch; false when the client left
// (the request is cancelled) or the replica crashed (the connection is
// dropped).
func (r *Replica) await(w http.ResponseWriter, req *http.Request, id RequestID, ch <-chan Event, crashCh <-chan struct{}) (Event, bool) {
	select {
	case ev := <-ch:
		return ev, true
	case <-req.Context().Done():
		r.cancel(id)
	case <-crashCh:
		dropConnection(w)
	}
	return Event{}, false
}

// answer is what every part of one request's answer repeats.
type answer struct {
	g       genRequest
	respID  string
	model   string
	created int64
}

// writeWhole answers a request that does not stream, in its API's shape.
func writeWhole(w http.ResponseWriter, a answer, done Event) {
	text := OutputText(0, done.OutputTokens)
	u := usageOf(done)
	switch a.g.kind {
	case kindChat:
		writeJSON(w, http.StatusOK, a.g.pd.answerFields(done, map[string]any{
			"id": a.respID, "object": "chat.completion", "created": a.created, "model": a.model,
			"choices": []any{map[string]any{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": text},
				"logprobs":      nil,
				"finish_reason": "length",
			}},
			"usage": u,
		}))
	case kindCompletion:
		writeJSON(w, http.StatusOK, a.g.pd.answerFields(done, map[string]any{
			"id": a.respID, "object": "text_completion", "created": a.created, "model": a.model,
			"choices": []any{map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": "length"}},
			"usage":   u,
		}))
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"generated_text": text,
			"details": map[string]any{
				"finish_reason":    "length",
				"prompt_tokens":    done.PromptTokens,
				"generated_tokens": done.OutputTokens,
				"cached_tokens":    done.CachedTokens,
			},
			"usage": u,
		})
	}
}

// eventStream writes one answer's server-sent events.
type eventStream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	a    answer
	sent int // output tokens sent so far
}

// send writes one chunk and flushes it; false when the client is gone.
func (es *eventStream) send(choices []any, u *usage) bool {
	object := "chat.completion.chunk"
	if es.a.g.kind == kindCompletion {
		object = "text_completion"
	}
	m := map[string]any{"id": es.a.respID, "object": object, "created": es.a.created, "model": es.a.model, "choices": choices}
	if u != nil {
		m["usage"] = u
	}
	b, _ := json.Marshal(m)
	if _, err := fmt.Fprintf(es.w, "data: %s\n\n", b); err != nil {
		return false
	}
	return es.rc.Flush() == nil
}

// choice is one chunk's choices: a chat delta or a completion's text.
func (es *eventStream) choice(text string, finish any) []any {
	if es.a.g.kind == kindChat {
		delta := map[string]any{}
		if text != "" {
			delta["content"] = text
		}
		return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}
	return []any{map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": finish}}
}

// emit sends the output tokens generated since the last chunk, up to upto.
func (es *eventStream) emit(upto int) bool {
	if upto <= es.sent {
		return true
	}
	ok := es.send(es.choice(OutputText(es.sent, upto), nil), nil)
	es.sent = upto
	return ok
}

// stream writes a server-sent event stream: a role chunk (chat), content
// chunks as tokens are generated, a chunk with finish_reason, a usage chunk
// with empty choices if asked, and "data: [DONE]".
func (r *Replica) stream(w http.ResponseWriter, req *http.Request, a answer, run running) {
	id := run.id
	es := &eventStream{w: w, rc: http.NewResponseController(w), a: a}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if a.g.kind == kindChat && !es.send([]any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""},
		"logprobs": nil, "finish_reason": nil}}, nil) {
		r.cancel(id)
		return
	}
	if !es.emit(1) {
		r.cancel(id)
		return
	}
	done, ok := r.streamUntilDone(req.Context(), es.emit, run)
	if !ok || !es.emit(done.OutputTokens) || !es.send(es.choice("", "length"), nil) {
		return
	}
	if a.g.includeUsage {
		u := usageOf(done)
		if !es.send([]any{}, &u) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	es.rc.Flush()
}

// streamUntilDone sends the tokens generated so far at each decode tick
// until the request is done; false when the client left (the request is
// cancelled). A crash aborts the handler, cutting the stream.
func (r *Replica) streamUntilDone(ctx context.Context, emit func(upto int) bool, run running) (Event, bool) {
	id := run.id
	tick := time.Duration(float64(r.cfg.Engine.DecodeStep(1)) / r.cfg.Speed)
	tick = min(max(tick, 2*time.Millisecond), 50*time.Millisecond)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case done := <-run.wt.done:
			return done, true
		case <-ticker.C:
			if !emit(r.generated(id)) {
				r.cancel(id)
				return Event{}, false
			}
		case <-ctx.Done():
			r.cancel(id)
			return Event{}, false
		case <-run.crashCh:
			panic(http.ErrAbortHandler)
		}
	}
}

// ---- models and adapters ----

func (r *Replica) handleModels(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID          string  `json:"id"`
		Object      string  `json:"object"`
		Created     int64   `json:"created"`
		OwnedBy     string  `json:"owned_by"`
		Root        string  `json:"root"`
		Parent      *string `json:"parent"`
		MaxModelLen int     `json:"max_model_len,omitempty"`
	}
	base := r.cfg.Model
	data := []model{{ID: base, Object: "model", Created: r.created, OwnedBy: "vllm", Root: base, MaxModelLen: r.cfg.Engine.MaxModelLen}}
	r.mu.Lock()
	for _, a := range r.adapters {
		data = append(data, model{ID: a.name, Object: "model", Created: r.created, OwnedBy: "vllm", Root: a.path, Parent: &base})
	}
	r.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (r *Replica) handleLoadLoRA(w http.ResponseWriter, req *http.Request) {
	b, ok := readBody(w, req)
	if !ok {
		return
	}
	var body struct {
		Name string `json:"lora_name"`
		Path string `json:"lora_path"`
	}
	if !decodeJSON(w, b, &body) {
		return
	}
	if body.Name == "" || body.Path == "" {
		writeError(w, http.StatusBadRequest, "Both 'lora_name' and 'lora_path' must be provided.")
		return
	}
	if err := r.LoadAdapter(body.Name, body.Path); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", body.Name)
}

func (r *Replica) handleUnloadLoRA(w http.ResponseWriter, req *http.Request) {
	b, ok := readBody(w, req)
	if !ok {
		return
	}
	var body struct {
		Name string `json:"lora_name"`
	}
	if !decodeJSON(w, b, &body) {
		return
	}
	if body.Name == "" {
		writeError(w, http.StatusBadRequest, "'lora_name' must be provided.")
		return
	}
	if err := r.UnloadAdapter(body.Name); err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", body.Name)
}

// LoadAdapter loads a LoRA adapter; it fails if the name is taken.
func (r *Replica) LoadAdapter(name, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == r.cfg.Model {
		return fmt.Errorf("The lora adapter '%s' has the base model's name.", name)
	}
	for _, a := range r.adapters {
		if a.name == name {
			return fmt.Errorf("The lora adapter '%s' has already been loaded.", name)
		}
	}
	r.adapters = append(r.adapters, adapter{name, path})
	return nil
}

// UnloadAdapter unloads a LoRA adapter; it fails if it is not loaded.
func (r *Replica) UnloadAdapter(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range r.adapters {
		if a.name == name {
			r.adapters = append(r.adapters[:i:i], r.adapters[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("The lora adapter '%s' cannot be found.", name)
}

// Adapters returns the names of the loaded LoRA adapters.
func (r *Replica) Adapters() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, len(r.adapters))
	for i, a := range r.adapters {
		names[i] = a.name
	}
	return names
}

// ---- faults ----

func (r *Replica) handleGetFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, r.Faults())
}

func (r *Replica) handleSetFaults(w http.ResponseWriter, req *http.Request) {
	b, ok := readBody(w, req)
	if !ok {
		return
	}
	var f Faults
	if !decodeJSON(w, b, &f) {
		return
	}
	if err := f.validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	crash := f.Crash
	f.Crash = false
	r.SetFaults(f)
	if !crash {
		writeJSON(w, http.StatusOK, map[string]any{"faults": f, "crashing": false})
		return
	}
	// The crash closes this connection too, so the answer must be complete
	// on the wire first: a Content-Length body, flushed, never a chunked one
	// whose last chunk is written only after the handler returns.
	b, _ = json.Marshal(map[string]any{"faults": f, "crashing": true})
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	http.NewResponseController(w).Flush()
	go r.Crash()
}
