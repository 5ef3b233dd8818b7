package vllmsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// SimulatedVersion is what GET /version reports: the vLLM release whose
// HTTP surface vllmsim follows.
const SimulatedVersion = "0.11.0"

// maxVocab bounds the table that lets /detokenize map ids back to text.
const maxVocab = 1 << 18

// vocab remembers the text of the tokens /tokenize produced, in this
// process (so every replica of a fleet can detokenize what any tokenized).
// Token ids are hashes, so the table is the only way back; when full it
// starts over.
var vocab = struct {
	sync.Mutex
	m map[Token]string
}{m: make(map[Token]string)}

// tokenizeText tokenizes text and records its tokens' text for Detokenize.
func tokenizeText(text string) ([]Token, []string) {
	ids, strs := TokenizeWithText(text)
	vocab.Lock()
	if len(vocab.m)+len(ids) > maxVocab {
		clear(vocab.m)
	}
	for i, id := range ids {
		vocab.m[id] = strs[i]
	}
	vocab.Unlock()
	return ids, strs
}

// TokenizeWithText returns Tokenize(text) and each token's text.
func TokenizeWithText(text string) ([]Token, []string) {
	ids := Tokenize(text)
	strs := make([]string, 0, len(ids))
	// Tokens tile the text in order, so each token's text is found by
	// growing a piece from the current offset until its hash matches.
	off := 0
	for _, id := range ids {
		end := off + 1
		for end < len(text) && tokenID(text[off:end]) != id {
			end++
		}
		strs = append(strs, text[off:end])
		off = end
	}
	return ids, strs
}

// Detokenize returns the text of tokens made by /tokenize in this process,
// or an error naming the first id it does not know.
func Detokenize(ids []Token) (string, error) {
	vocab.Lock()
	defer vocab.Unlock()
	var b strings.Builder
	for i, id := range ids {
		s, ok := vocab.m[id]
		if !ok {
			return "", fmt.Errorf("tokens[%d]: token id %d is not in the vocabulary", i, id)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// renderChatTemplate is RenderChat with the assistant header optional.
func renderChatTemplate(msgs []ChatMessage, addGenerationPrompt bool) string {
	s := RenderChat(msgs)
	if !addGenerationPrompt {
		s = strings.TrimSuffix(s, "<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return s
}

type tokenizeRequest struct {
	Model               string          `json:"model"`
	Prompt              *string         `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	ReturnTokenStrs     bool            `json:"return_token_strs"`
	Tools               json.RawMessage `json:"tools"`
}

// text returns the text a tokenize request asks about: its prompt, or its
// messages through the chat template.
func (t *tokenizeRequest) text() (string, error) {
	switch {
	case t.Prompt != nil && t.Messages != nil:
		return "", fmt.Errorf(`body must have "prompt" or "messages", not both`)
	case t.Prompt != nil:
		return *t.Prompt, nil
	case t.Messages == nil:
		return "", fmt.Errorf(`body must have "prompt" or "messages"`)
	}
	msgs, err := chatMessages(t.Messages)
	if err != nil {
		return "", err
	}
	return renderChatTemplate(msgs, t.AddGenerationPrompt == nil || *t.AddGenerationPrompt), nil
}

func (r *Replica) handleTokenize(w http.ResponseWriter, req *http.Request) {
	var t tokenizeRequest
	if !readJSON(w, req, &t) {
		return
	}
	if _, ok := r.resolveModel(t.Model); !ok {
		writeModelNotFound(w, t.Model)
		return
	}
	text, err := t.text()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ids, strs := tokenizeText(text)
	out := map[string]any{"count": len(ids), "max_model_len": r.cfg.Engine.MaxModelLen, "tokens": ids, "token_strs": nil}
	if t.ReturnTokenStrs {
		out["token_strs"] = strs
	}
	writeJSON(w, http.StatusOK, out)
}

func (r *Replica) handleDetokenize(w http.ResponseWriter, req *http.Request) {
	var d struct {
		Model  string   `json:"model"`
		Tokens *[]Token `json:"tokens"`
	}
	if !readJSON(w, req, &d) {
		return
	}
	if _, ok := r.resolveModel(d.Model); !ok {
		writeModelNotFound(w, d.Model)
		return
	}
	if d.Tokens == nil {
		writeError(w, http.StatusBadRequest, "tokens: field required")
		return
	}
	text, err := Detokenize(*d.Tokens)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": text})
}

func handleVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": SimulatedVersion})
}
