package vllmsim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

func embeddings(t *testing.T, u, body string) map[string]any {
	t.Helper()
	status, m := postAny(t, u+"/v1/embeddings", body)
	if status != 200 {
		t.Fatalf("%d %v", status, m)
	}
	return m
}

func vectorOf(v any) []float64 {
	var out []float64
	for _, x := range v.([]any) {
		out = append(out, x.(float64))
	}
	return out
}

func TestEmbeddingsDeterministic(t *testing.T) {
	_, u := serve(t, fastConfig())
	m := embeddings(t, u, `{"model":"sim-model","input":["the quick brown fox","a lazy dog"]}`)
	if m["object"] != "list" || !strings.HasPrefix(m["id"].(string), "embd-") || m["model"] != "sim-model" {
		t.Fatalf("envelope %v", m)
	}
	a, b := vectorOf(dig(m, "data", 0, "embedding")), vectorOf(dig(m, "data", 1, "embedding"))
	if len(a) != EmbeddingDim || dig(m, "data", 1, "object") != "embedding" || num(dig(m, "data", 1, "index")) != 1 {
		t.Fatalf("data %v", dig(m, "data", 1))
	}
	var norm float64
	for _, x := range a {
		norm += x * x
	}
	if math.Abs(norm-1) > 1e-5 || slices.Equal(a, b) {
		t.Fatalf("norm %v; distinct inputs equal: %v", norm, slices.Equal(a, b))
	}
	again := embeddings(t, u, `{"input":"the quick brown fox"}`)
	if !slices.Equal(a, vectorOf(dig(again, "data", 0, "embedding"))) {
		t.Fatal("the same input gave another embedding")
	}
	b64 := embeddings(t, u, `{"input":"the quick brown fox","encoding_format":"base64"}`)
	raw, err := base64.StdEncoding.DecodeString(dig(b64, "data", 0, "embedding").(string))
	if err != nil || len(raw) != 4*EmbeddingDim {
		t.Fatalf("base64: %v, %d bytes", err, len(raw))
	}
	for i, x := range a {
		if float32(x) != math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])) {
			t.Fatalf("base64 value %d differs from the float one", i)
		}
	}
	short := embeddings(t, u, `{"input":"the quick brown fox","dimensions":8}`)
	if n := len(vectorOf(dig(short, "data", 0, "embedding"))); n != 8 {
		t.Fatalf("dimensions 8 gave %d", n)
	}
}

func TestPoolingUsesPrefixCache(t *testing.T) {
	_, u := serve(t, fastConfig())
	long := strings.Repeat("shared context for every pooling call ", 12)
	body, _ := json.Marshal(map[string]any{"input": long + "one"})
	embeddings(t, u, string(body))
	body, _ = json.Marshal(map[string]any{"input": long + "two"})
	m := embeddings(t, u, string(body))
	prompt, cached := num(dig(m, "usage", "prompt_tokens")), num(dig(m, "usage", "prompt_tokens_details", "cached_tokens"))
	if cached == 0 || cached%BlockSize != 0 || cached >= prompt || num(dig(m, "usage", "total_tokens")) != prompt {
		t.Fatalf("usage %v", m["usage"])
	}
}

func TestPoolingRouteShapes(t *testing.T) {
	_, u := serve(t, fastConfig())
	cases := []struct {
		path, body, prefix string
		check              func(m map[string]any) bool
	}{
		{"/pooling", `{"input":"abc"}`, "pool-", func(m map[string]any) bool {
			return dig(m, "data", 0, "object") == "pooling" && len(dig(m, "data", 0, "data").([]any)) == EmbeddingDim
		}},
		{"/classify", `{"model":"sim-model","input":["good","bad"]}`, "classify-", func(m map[string]any) bool {
			p := vectorOf(dig(m, "data", 1, "probs"))
			label, _ := dig(m, "data", 1, "label").(string)
			return len(p) == 2 && math.Abs(p[0]+p[1]-1) < 1e-9 && strings.HasPrefix(label, "LABEL_") && num(dig(m, "data", 1, "num_classes")) == 2
		}},
		{"/score", `{"text_1":"fox dog","text_2":["the fox","a cat"]}`, "score-", func(m map[string]any) bool {
			return dig(m, "data", 0, "object") == "score" && dig(m, "data", 0, "score") == 0.5 && dig(m, "data", 1, "score") == 0.0
		}},
		{"/v1/score", `{"text_1":["fox","cat"],"text_2":["fox","dog"]}`, "score-", func(m map[string]any) bool {
			return dig(m, "data", 0, "score") == 1.0 && dig(m, "data", 1, "score") == 0.0
		}},
	}
	for _, c := range cases {
		status, m := postAny(t, u+c.path, c.body)
		id, _ := m["id"].(string)
		if status != 200 || m["object"] != "list" || !strings.HasPrefix(id, c.prefix) || num(dig(m, "usage", "prompt_tokens")) == 0 || !c.check(m) {
			t.Errorf("%s %s: %d %v", c.path, c.body, status, m)
		}
	}
}

func TestRerankOrder(t *testing.T) {
	_, u := serve(t, fastConfig())
	body := `{"model":"sim-model","query":"quick brown fox","documents":["a lazy dog","the quick fox","quick brown fox jumps","brown bears"],"top_n":3}`
	for _, path := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		status, m := postAny(t, u+path, body)
		if status != 200 || !strings.HasPrefix(m["id"].(string), "rerank-") || num(dig(m, "usage", "total_tokens")) == 0 {
			t.Fatalf("%s: %d %v", path, status, m)
		}
		results := m["results"].([]any)
		var order []int
		for _, r := range results {
			order = append(order, num(dig(r, "index")))
		}
		if !slices.Equal(order, []int{2, 1, 3}) || dig(results, 0, "relevance_score") != 1.0 ||
			dig(results, 0, "document", "text") != "quick brown fox jumps" {
			t.Fatalf("%s: order %v, results %v", path, order, results)
		}
	}
}

func TestTokenizeRoundTrip(t *testing.T) {
	_, u := serve(t, fastConfig())
	texts := []string{
		"Hello, world!",
		"  two  spaces and\ttabs\nnewlines ",
		"<|begin_of_text|>special <|eot_id|> tokens <|not special",
		"Tokenization of überlange Wörter und 日本語",
		"x",
	}
	for _, text := range texts {
		body, _ := json.Marshal(map[string]any{"model": "sim-model", "prompt": text, "return_token_strs": true})
		status, m := postAny(t, u+"/tokenize", string(body))
		ids := make([]Token, 0)
		for _, v := range m["tokens"].([]any) {
			ids = append(ids, Token(v.(float64)))
		}
		if status != 200 || num(m["count"]) != len(ids) || !slices.Equal(ids, Tokenize(text)) || num(m["max_model_len"]) != 8192 {
			t.Fatalf("%q: %d %v", text, status, m)
		}
		var strs []string
		for _, s := range m["token_strs"].([]any) {
			strs = append(strs, s.(string))
		}
		// A token can split a multi-byte character, and JSON cannot carry
		// half of one: only whole-character texts rejoin from token_strs.
		if isASCII(text) && strings.Join(strs, "") != text {
			t.Fatalf("%q: token_strs %q", text, strs)
		}
		body, _ = json.Marshal(map[string]any{"tokens": ids})
		status, d := postAny(t, u+"/detokenize", string(body))
		if status != 200 || d["prompt"] != text {
			t.Fatalf("%q: detokenize %d %v", text, status, d)
		}
	}
	status, m := postAny(t, u+"/tokenize", `{"messages":[{"role":"user","content":"hi"}]}`)
	want := Tokenize(RenderChat([]ChatMessage{{Role: "user", Content: "hi"}}))
	if status != 200 || num(m["count"]) != len(want) || m["token_strs"] != nil {
		t.Fatalf("messages: %d %v", status, m)
	}
	if status, v := getAny(t, u+"/version"); status != 200 || v["version"] != SimulatedVersion {
		t.Fatalf("version %d %v", status, v)
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
