package vllmsim

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/zeebo/xxh3"
)

// EmbeddingDim is the length of the simulated model's embeddings.
const EmbeddingDim = 256

// Embed returns the deterministic unit-length embedding of tokens: the sum
// of one pseudo-random vector per token (seeded by the token id), so texts
// sharing tokens point in similar directions.
func Embed(tokens []Token) []float32 {
	acc := make([]float64, EmbeddingDim)
	var buf [4]byte
	for _, t := range tokens {
		binary.LittleEndian.PutUint32(buf[:], t)
		x := xxh3.Hash(buf[:])
		for i := range acc {
			x = splitmix(x)
			acc[i] += float64(int64(x)) / math.MaxInt64
		}
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	norm = math.Sqrt(norm)
	out := make([]float32, EmbeddingDim)
	for i, v := range acc {
		if norm > 0 {
			out[i] = float32(v / norm)
		}
	}
	return out
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Score returns the deterministic relevance of doc to query in [0, 1]: the
// share of the query's distinct words (case folded) that doc contains.
func Score(query, doc string) float64 {
	q := wordSet(query)
	if len(q) == 0 {
		return 0
	}
	d := wordSet(doc)
	hits := 0
	for w := range q {
		if d[w] {
			hits++
		}
	}
	return float64(hits) / float64(len(q))
}

func wordSet(s string) map[string]bool {
	set := make(map[string]bool)
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		set[w] = true
	}
	return set
}

// pairPrompt is a cross-encoder's prompt for a (query, document) pair: the
// query first, so calls sharing a query share a prefix.
func pairPrompt(query, doc string) []Token {
	return Tokenize(query + "<|sep|>" + doc)
}

// poolingInputs parses a pooling request's input: a string, an array of
// strings, token ids, or an array of token-id arrays.
func poolingInputs(raw json.RawMessage) ([][]Token, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("input: field required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return [][]Token{Tokenize(s)}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		out := make([][]Token, len(ss))
		for i, s := range ss {
			out[i] = Tokenize(s)
		}
		return nonEmpty(out)
	}
	var ids []Token
	if err := json.Unmarshal(raw, &ids); err == nil {
		return nonEmpty([][]Token{ids})
	}
	var idss [][]Token
	if err := json.Unmarshal(raw, &idss); err == nil {
		return nonEmpty(idss)
	}
	return nil, errors.New("input: must be a string, an array of strings, token ids, or arrays of token ids")
}

func nonEmpty(in [][]Token) ([][]Token, error) {
	if len(in) == 0 {
		return nil, errors.New("input: must not be an empty array")
	}
	for i, p := range in {
		if len(p) == 0 {
			return nil, fmt.Errorf("input[%d]: must not be empty", i)
		}
	}
	return in, nil
}

// poolResult is what the engine reports for a pooling request's prompts.
type poolResult struct {
	events []Event
	usage  usage
}

// pool runs each prompt through the engine as a prefill (one output step,
// which pooling reports as no completion tokens) and waits for all.
func (r *Replica) pool(w http.ResponseWriter, req *http.Request, model string, prompts [][]Token) (poolResult, bool) {
	one := 1
	runs := make([]running, 0, len(prompts))
	cancelAll := func() {
		for _, run := range runs {
			r.cancel(run.id)
		}
	}
	for _, p := range prompts {
		sub, ok := r.admit(w, genRequest{model: model, prompt: p, maxTokens: &one})
		if !ok {
			cancelAll()
			return poolResult{}, false
		}
		id, wt, crashCh, ok := r.submitOrFail(w, writeError, sub)
		if !ok {
			cancelAll()
			return poolResult{}, false
		}
		runs = append(runs, running{id: id, wt: wt, crashCh: crashCh})
	}
	var res poolResult
	for i, run := range runs {
		ev, ok := r.finish(w, req, run)
		if !ok {
			for _, rest := range runs[i+1:] {
				r.cancel(rest.id)
			}
			return poolResult{}, false
		}
		res.events = append(res.events, ev)
		res.usage.PromptTokens += ev.PromptTokens
		res.usage.PromptTokensDetails.CachedTokens += ev.CachedTokens
	}
	res.usage.TotalTokens = res.usage.PromptTokens
	return res, true
}

type poolingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Messages       []chatMessage   `json:"messages"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// prompts returns the request's prompts: its input, or its messages through
// the chat template.
func (p *poolingRequest) prompts() ([][]Token, error) {
	if p.Messages != nil {
		msgs, err := chatMessages(p.Messages)
		if err != nil {
			return nil, err
		}
		return [][]Token{Tokenize(RenderChat(msgs))}, nil
	}
	return poolingInputs(p.Input)
}

// vector encodes an embedding as encoding_format asks.
func (p *poolingRequest) vector(v []float32) any {
	if p.Dimensions != nil {
		v = renormalized(v[:*p.Dimensions])
	}
	if p.EncodingFormat != "base64" {
		return v
	}
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func (p *poolingRequest) check() error {
	switch p.EncodingFormat {
	case "", "float", "base64":
	default:
		return fmt.Errorf("encoding_format: must be \"float\" or \"base64\", not %q", p.EncodingFormat)
	}
	if d := p.Dimensions; d != nil && (*d < 1 || *d > EmbeddingDim) {
		return fmt.Errorf("dimensions: must be within [1, %d]", EmbeddingDim)
	}
	return nil
}

func renormalized(v []float32) []float32 {
	var n float64
	for _, f := range v {
		n += float64(f) * float64(f)
	}
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = float32(float64(f) / math.Sqrt(n))
	}
	return out
}

// handleEmbed serves /v1/embeddings (object "embedding", key "embedding")
// and /pooling (object "pooling", key "data").
func (r *Replica) handleEmbed(prefix, object, key string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var p poolingRequest
		if !readJSON(w, req, &p) {
			return
		}
		prompts, err := p.prompts()
		if err == nil {
			err = p.check()
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		res, ok := r.pool(w, req, p.Model, prompts)
		if !ok {
			return
		}
		data := make([]any, len(prompts))
		for i, pr := range prompts {
			data[i] = map[string]any{"index": i, "object": object, key: p.vector(Embed(pr))}
		}
		writeJSON(w, http.StatusOK, r.listAnswer(prefix, p.Model, data, res.usage))
	}
}

// listAnswer is the list envelope of vLLM's pooling answers.
func (r *Replica) listAnswer(prefix, model string, data []any, u usage) map[string]any {
	return map[string]any{
		"id": r.newID(prefix), "object": "list", "created": time.Now().Unix(),
		"model": cmp.Or(model, r.cfg.Model), "data": data, "usage": u,
	}
}

// classLabels are the simulated classifier's labels.
var classLabels = []string{"LABEL_0", "LABEL_1"}

func (r *Replica) handleClassify(w http.ResponseWriter, req *http.Request) {
	var p poolingRequest
	if !readJSON(w, req, &p) {
		return
	}
	prompts, err := poolingInputs(p.Input)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	res, ok := r.pool(w, req, p.Model, prompts)
	if !ok {
		return
	}
	data := make([]any, len(prompts))
	for i, pr := range prompts {
		// Two logits from the embedding give a deterministic softmax.
		e := Embed(pr)
		p1 := 1 / (1 + math.Exp(float64(e[0]-e[1])*8))
		probs := []float64{1 - p1, p1}
		label := classLabels[0]
		if p1 > 0.5 {
			label = classLabels[1]
		}
		data[i] = map[string]any{"index": i, "label": label, "probs": probs, "num_classes": len(classLabels)}
	}
	writeJSON(w, http.StatusOK, r.listAnswer("classify", p.Model, data, res.usage))
}

// textList parses a string or an array of strings named name.
func textList(raw json.RawMessage, name string) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("%s: field required", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		return nil, fmt.Errorf("%s: must be a string or an array of strings", name)
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("%s: must not be an empty array", name)
	}
	return ss, nil
}

// scorePairs pairs text_1 with text_2 as vLLM does: one with many, or
// element by element when both have the same length.
func scorePairs(raw1, raw2 json.RawMessage) ([][2]string, error) {
	t1, err := textList(raw1, "text_1")
	if err != nil {
		return nil, err
	}
	t2, err := textList(raw2, "text_2")
	if err != nil {
		return nil, err
	}
	if len(t1) != 1 && len(t1) != len(t2) {
		return nil, fmt.Errorf("text_1: has %d texts and text_2 %d; text_1 must have one, or as many as text_2", len(t1), len(t2))
	}
	pairs := make([][2]string, len(t2))
	for i, d := range t2 {
		pairs[i] = [2]string{t1[min(i, len(t1)-1)], d}
	}
	return pairs, nil
}

func (r *Replica) handleScore(w http.ResponseWriter, req *http.Request) {
	var s struct {
		Model string          `json:"model"`
		Text1 json.RawMessage `json:"text_1"`
		Text2 json.RawMessage `json:"text_2"`
	}
	if !readJSON(w, req, &s) {
		return
	}
	pairs, err := scorePairs(s.Text1, s.Text2)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	prompts := make([][]Token, len(pairs))
	for i, p := range pairs {
		prompts[i] = pairPrompt(p[0], p[1])
	}
	res, ok := r.pool(w, req, s.Model, prompts)
	if !ok {
		return
	}
	data := make([]any, len(pairs))
	for i, p := range pairs {
		data[i] = map[string]any{"index": i, "object": "score", "score": Score(p[0], p[1])}
	}
	writeJSON(w, http.StatusOK, r.listAnswer("score", s.Model, data, res.usage))
}

type rerankRequest struct {
	Model     string          `json:"model"`
	Query     *string         `json:"query"`
	Documents json.RawMessage `json:"documents"`
	TopN      int             `json:"top_n"`
}

func (r *Replica) handleRerank(w http.ResponseWriter, req *http.Request) {
	var rr rerankRequest
	if !readJSON(w, req, &rr) {
		return
	}
	if rr.Query == nil {
		writeError(w, http.StatusBadRequest, "query: field required")
		return
	}
	docs, err := textList(rr.Documents, "documents")
	if err == nil && rr.TopN < 0 {
		err = errors.New("top_n: must not be negative")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	prompts := make([][]Token, len(docs))
	for i, d := range docs {
		prompts[i] = pairPrompt(*rr.Query, d)
	}
	res, ok := r.pool(w, req, rr.Model, prompts)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": r.newID("rerank"), "model": cmp.Or(rr.Model, r.cfg.Model),
		"usage":   map[string]int{"total_tokens": res.usage.PromptTokens},
		"results": rerankResults(*rr.Query, docs, rr.TopN),
	})
}

// rerankResults scores docs against query, best first (ties by index),
// keeping the top n (0: all).
func rerankResults(query string, docs []string, n int) []any {
	type result struct {
		i     int
		score float64
	}
	rs := make([]result, len(docs))
	for i, d := range docs {
		rs[i] = result{i, Score(query, d)}
	}
	slices.SortStableFunc(rs, func(a, b result) int { return cmp.Compare(b.score, a.score) })
	if n > 0 && n < len(rs) {
		rs = rs[:n]
	}
	out := make([]any, len(rs))
	for k, res := range rs {
		out[k] = map[string]any{"index": res.i, "document": map[string]string{"text": docs[res.i]}, "relevance_score": res.score}
	}
	return out
}
