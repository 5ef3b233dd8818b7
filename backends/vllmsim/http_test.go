package vllmsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fastConfig is a tiny engine run 1000× faster than real time.
func fastConfig() Config {
	return Config{Preset: "tiny", Model: "sim-model", Speed: 1000, Adapters: []string{"ad1"}}
}

func startFleet(t *testing.T, k int, cfg Config) *Fleet {
	t.Helper()
	f, err := StartFleet(context.Background(), "127.0.0.1:0", k, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		// A later fleet may listen on a port this one used; a kept-alive
		// connection to the closed server would then fail its first POST
		// with an EOF that no client retries.
		http.DefaultClient.CloseIdleConnections()
	})
	return f
}

func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

type chatResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func chatBody(model, system, user, salt string, maxTokens int) string {
	m := map[string]any{
		"model": model,
		"messages": []map[string]string{
			{"role": "system", "content": system},
			{"role": "user", "content": user},
		},
		"max_tokens": maxTokens,
	}
	if salt != "" {
		m["cache_salt"] = salt
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func chat(t *testing.T, base, body string) chatResponse {
	t.Helper()
	resp, b := post(t, base+"/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var c chatResponse
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

var longSystem = strings.Repeat("You are a helpful assistant who answers questions about routing. ", 20)

func TestChatCompletionAndPerReplicaCache(t *testing.T) {
	f := startFleet(t, 2, fastConfig())
	u := f.URLs()
	body := chatBody("sim-model", longSystem, "What is a prefix cache?", "", 5)

	c := chat(t, u[0], body)
	if c.Object != "chat.completion" || c.Model != "sim-model" || len(c.Choices) != 1 ||
		c.Choices[0].Message.Role != "assistant" || c.Choices[0].FinishReason != "length" {
		t.Fatalf("bad response %+v", c)
	}
	if c.Usage.CompletionTokens != 5 || c.Usage.TotalTokens != c.Usage.PromptTokens+5 || c.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("usage %+v", c.Usage)
	}
	if c.Choices[0].Message.Content != OutputText(0, 5) {
		t.Fatalf("content %q", c.Choices[0].Message.Content)
	}
	p := c.Usage.PromptTokens
	warm := chat(t, u[0], body)
	if got, want := warm.Usage.PromptTokensDetails.CachedTokens, (p-1)/16*16; got != want {
		t.Fatalf("warm cached %d, want %d", got, want)
	}
	// The other replica has its own cache.
	if got := chat(t, u[1], body).Usage.PromptTokensDetails.CachedTokens; got != 0 {
		t.Fatalf("replica 1 cached %d", got)
	}
	// A different question with the same system prompt shares its blocks.
	other := chat(t, u[0], chatBody("sim-model", longSystem, "Something else entirely?", "", 5))
	if got := other.Usage.PromptTokensDetails.CachedTokens; got == 0 || got%16 != 0 || got >= other.Usage.PromptTokens {
		t.Fatalf("shared system prompt cached %d of %d", got, other.Usage.PromptTokens)
	}
	// cache_salt and adapters isolate.
	if got := chat(t, u[0], chatBody("sim-model", longSystem, "What is a prefix cache?", "tenant-a", 5)).Usage.PromptTokensDetails.CachedTokens; got != 0 {
		t.Fatalf("salted request cached %d", got)
	}
	if got := chat(t, u[0], chatBody("ad1", longSystem, "What is a prefix cache?", "", 5)); got.Usage.PromptTokensDetails.CachedTokens != 0 || got.Model != "ad1" {
		t.Fatalf("adapter request %+v", got)
	}
	resp, _ := post(t, u[0]+"/v1/chat/completions", body)
	if resp.Header.Get("X-Vllmsim-Replica") != "vllmsim-0" {
		t.Fatalf("replica header %q", resp.Header.Get("X-Vllmsim-Replica"))
	}
}

func TestHandlerWithHTTPTest(t *testing.T) {
	r, err := NewReplica("solo", fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	srv := httptest.NewServer(r)
	defer srv.Close()
	c := chat(t, srv.URL, chatBody("", "hi", "there", "", 3))
	if c.Usage.CompletionTokens != 3 || c.Model != "sim-model" {
		t.Fatalf("%+v", c)
	}
}

func TestBadRequests(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	cases := []struct {
		path, body string
		status     int
	}{
		{"/v1/chat/completions", "{not json", 400},
		{"/v1/chat/completions", `{"model":"sim-model"}`, 400},
		{"/v1/chat/completions", `{"model":"sim-model","messages":[{"content":"x"}]}`, 400},
		{"/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, 404},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":0}`, 400},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":100000}`, 400},
		{"/v1/completions", `{"model":"sim-model"}`, 400},
		{"/v1/completions", `{"model":"nope","prompt":"x"}`, 404},
		{"/invocations", `{"foo":1}`, 400},
		{"/v1/load_lora_adapter", `{"lora_name":"x"}`, 400},
		{"/v1/unload_lora_adapter", `{"lora_name":"never-loaded"}`, 404},
	}
	for _, c := range cases {
		resp, b := post(t, u+c.path, c.body)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d: %s", c.path, c.body, resp.StatusCode, c.status, b)
			continue
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" || e.Error.Code != c.status {
			t.Errorf("%s %s: error body %s", c.path, c.body, b)
		}
	}
}

// sseEvents reads "data: " payloads of an event stream.
func sseEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("bad SSE line %q", line)
		}
		out = append(out, data)
	}
	return out
}

type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func TestChatStreamOrder(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	for _, includeUsage := range []bool{true, false} {
		body := `{"model":"sim-model","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"stream please"}]` +
			map[bool]string{true: `,"stream_options":{"include_usage":true}}`, false: `}`}[includeUsage]
		resp, err := http.Post(u+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("content type %q", ct)
		}
		events := sseEvents(t, resp.Body)
		resp.Body.Close()
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("last event %q", events[len(events)-1])
		}
		events = events[:len(events)-1]
		var chunks []chunk
		for _, e := range events {
			var c chunk
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatalf("chunk %q: %v", e, err)
			}
			if c.Object != "chat.completion.chunk" {
				t.Fatalf("object %q", c.Object)
			}
			chunks = append(chunks, c)
		}
		if r := chunks[0].Choices[0].Delta.Role; r == nil || *r != "assistant" {
			t.Fatalf("first chunk %s", events[0])
		}
		if includeUsage {
			last := chunks[len(chunks)-1]
			if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != 20 {
				t.Fatalf("usage chunk %s", events[len(events)-1])
			}
			chunks = chunks[:len(chunks)-1]
		}
		fin := chunks[len(chunks)-1]
		if fr := fin.Choices[0].FinishReason; fr == nil || *fr != "length" || fin.Usage != nil {
			t.Fatalf("finish chunk %+v", fin)
		}
		var text strings.Builder
		for i, c := range chunks[1 : len(chunks)-1] {
			if len(c.Choices) != 1 || c.Choices[0].Delta.Content == nil || c.Choices[0].FinishReason != nil || c.Choices[0].Delta.Role != nil {
				t.Fatalf("content chunk %d: %+v", i, c)
			}
			text.WriteString(*c.Choices[0].Delta.Content)
		}
		if text.String() != OutputText(0, 20) {
			t.Fatalf("streamed text %q", text.String())
		}
	}
}

func TestCompletionsStreamAndPlain(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	resp, b := post(t, u+"/v1/completions", `{"model":"sim-model","prompt":"Once upon a time","max_tokens":4}`)
	var c chatResponse
	if err := json.Unmarshal(b, &c); err != nil || resp.StatusCode != 200 || c.Object != "text_completion" || c.Choices[0].Text != OutputText(0, 4) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	resp, err := http.Post(u+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":[1,2,3,4,5],"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	events := sseEvents(t, resp.Body)
	resp.Body.Close()
	if events[len(events)-1] != "[DONE]" {
		t.Fatal(events)
	}
	var text strings.Builder
	var sawFinish, sawUsage bool
	for _, e := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(e), &c); err != nil || c.Object != "text_completion" {
			t.Fatalf("chunk %q", e)
		}
		switch {
		case sawUsage:
			t.Fatalf("chunk after usage: %s", e)
		case c.Usage != nil:
			if len(c.Choices) != 0 || !sawFinish || c.Usage.PromptTokens != 5 {
				t.Fatalf("usage chunk %s", e)
			}
			sawUsage = true
		case sawFinish:
			t.Fatalf("chunk after finish: %s", e)
		case c.Choices[0].FinishReason != nil:
			sawFinish = true
		default:
			text.WriteString(*c.Choices[0].Text)
		}
	}
	if !sawUsage || text.String() != OutputText(0, 6) {
		t.Fatalf("usage %v text %q", sawUsage, text.String())
	}
}

func TestInvocations(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	resp, b := post(t, u+"/invocations", `{"inputs":"Tell me a story about caches","parameters":{"max_new_tokens":3}}`)
	var n struct {
		GeneratedText string `json:"generated_text"`
		Details       struct {
			FinishReason    string `json:"finish_reason"`
			GeneratedTokens int    `json:"generated_tokens"`
		} `json:"details"`
		Usage struct {
			PromptTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &n); err != nil || resp.StatusCode != 200 || n.GeneratedText != OutputText(0, 3) ||
		n.Details.GeneratedTokens != 3 || n.Usage.PromptTokensDetails == nil {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	c := chat(t, u, chatBody("sim-model", "sys", "hi", "", 2))
	resp, b = post(t, u+"/invocations", chatBody("sim-model", "sys", "hi", "", 2))
	var c2 chatResponse
	json.Unmarshal(b, &c2)
	if resp.StatusCode != 200 || c2.Object != "chat.completion" || c2.Usage.PromptTokens != c.Usage.PromptTokens {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	resp, b = post(t, u+"/invocations", `{"prompt":"abc","max_tokens":2}`)
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"text_completion"`)) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

func TestModelsAndLoRA(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	models := func() map[string]*string {
		resp, err := http.Get(u + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l struct {
			Object string `json:"object"`
			Data   []struct {
				ID     string  `json:"id"`
				Object string  `json:"object"`
				Parent *string `json:"parent"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || l.Object != "list" {
			t.Fatal(err, l.Object)
		}
		m := map[string]*string{}
		for _, d := range l.Data {
			m[d.ID] = d.Parent
		}
		return m
	}
	m := models()
	if len(m) != 2 || m["sim-model"] != nil || m["ad1"] == nil || *m["ad1"] != "sim-model" {
		t.Fatalf("models %v", m)
	}
	if resp, b := post(t, u+"/v1/load_lora_adapter", `{"lora_name":"ad2","lora_path":"/x/ad2"}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if resp, _ := post(t, u+"/v1/load_lora_adapter", `{"lora_name":"ad2","lora_path":"/x/ad2"}`); resp.StatusCode != 400 {
		t.Fatalf("double load: %d", resp.StatusCode)
	}
	if m := models(); m["ad2"] == nil {
		t.Fatalf("ad2 not listed: %v", m)
	}
	chat(t, u, chatBody("ad2", "s", "u", "", 1))
	if resp, _ := post(t, u+"/v1/unload_lora_adapter", `{"lora_name":"ad2"}`); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	if resp, _ := post(t, u+"/v1/chat/completions", chatBody("ad2", "s", "u", "", 1)); resp.StatusCode != 404 {
		t.Fatalf("unloaded adapter: %d", resp.StatusCode)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	resp, err := http.Get(u + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) != 0 {
		t.Fatalf("health %d %q", resp.StatusCode, b)
	}
	body := chatBody("sim-model", longSystem, "q", "", 2)
	chat(t, u, body)
	chat(t, u, body)
	resp, err = http.Get(u + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(b)
	for _, want := range []string{
		"# TYPE vllm:num_requests_running gauge",
		`vllm:num_requests_running{model_name="sim-model"} 0`,
		`vllm:num_requests_waiting{model_name="sim-model"} 0`,
		`vllm:kv_cache_usage_perc{model_name="sim-model"} 0`,
		"# TYPE vllm:prefix_cache_queries_total counter",
		`vllm:prefix_cache_queries_total{model_name="sim-model"}`,
		`vllm:prefix_cache_hits_total{model_name="sim-model"}`,
		"# TYPE vllm:time_to_first_token_seconds histogram",
		`vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="sim-model"} 2`,
		`vllm:time_to_first_token_seconds_count{model_name="sim-model"} 2`,
		`vllm:time_to_first_token_seconds_sum{model_name="sim-model"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	s := f.Replicas()[0].Stats()
	if s.PrefixCacheHits == 0 || s.PrefixCacheQueries <= s.PrefixCacheHits {
		t.Fatalf("stats %+v", s)
	}
}

func TestCancelOnClientGone(t *testing.T) {
	cfg := fastConfig()
	cfg.Speed = 1
	f := startFleet(t, 1, cfg)
	r := f.Replicas()[0]
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", f.URLs()[0]+"/v1/chat/completions",
		strings.NewReader(chatBody("", "s", "u", "", 5000)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return r.Stats().Running == 1 })
	cancel()
	<-done
	waitFor(t, func() bool { s := r.Stats(); return s.Running == 0 && s.RequestsAborted == 1 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestLiveQueueingShowsInMetrics(t *testing.T) {
	cfg := fastConfig()
	cfg.Speed = 1
	cfg.Engine.MaxNumSeqs = 1
	f := startFleet(t, 1, cfg)
	u := f.URLs()[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 3 {
		req, _ := http.NewRequestWithContext(ctx, "POST", u+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":5000}`))
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	waitFor(t, func() bool {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), `vllm:num_requests_running{model_name="sim-model"} 1.0`+"\n") &&
			strings.Contains(string(b), `vllm:num_requests_waiting{model_name="sim-model"} 2.0`+"\n")
	})
	cancel()
	waitFor(t, func() bool { s := f.Replicas()[0].Stats(); return s.Running == 0 && s.Waiting == 0 })
}
