package vllmsim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serve starts a replica behind an httptest server and returns its URL.
func serve(t *testing.T, cfg Config) (*Replica, string) {
	t.Helper()
	r, err := NewReplica("r0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		srv.Close()
		r.Close()
	})
	return r, srv.URL
}

// postAny posts a JSON body and decodes a JSON answer into a map.
func postAny(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, b := post(t, url, body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("POST %s: answer is not JSON: %s", url, b)
	}
	return resp.StatusCode, m
}

func getAny(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("GET %s: answer is not JSON: %v", url, err)
	}
	return resp.StatusCode, m
}

// dig follows keys (strings for objects, ints for arrays) into v.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// namedEvent is one "event: T\ndata: {...}" server-sent event.
type namedEvent struct {
	typ  string
	data map[string]any
}

// namedEvents reads a stream of named events; the data's "type" must match
// the event line.
func namedEvents(t *testing.T, r io.Reader) []namedEvent {
	t.Helper()
	var out []namedEvent
	var typ string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			typ = e
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil || m["type"] != typ {
			t.Fatalf("event %q: bad data %s", typ, d)
		}
		out = append(out, namedEvent{typ, m})
	}
	return out
}

func postStream(t *testing.T, url, body string) []namedEvent {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return namedEvents(t, resp.Body)
}

func TestResponsesPlain(t *testing.T) {
	_, u := serve(t, fastConfig())
	status, m := postAny(t, u+"/v1/responses", `{"model":"sim-model","input":"hello there","instructions":"be brief","max_output_tokens":4}`)
	if status != 200 {
		t.Fatalf("status %d: %v", status, m)
	}
	id, _ := m["id"].(string)
	if !strings.HasPrefix(id, "resp_") || m["object"] != "response" || m["status"] != "completed" || m["model"] != "sim-model" {
		t.Fatalf("envelope %v", m)
	}
	if got := dig(m, "output", 0, "content", 0, "text"); got != OutputText(0, 4) {
		t.Fatalf("output text %q", got)
	}
	if dig(m, "output", 0, "role") != "assistant" || dig(m, "output", 0, "type") != "message" {
		t.Fatalf("output item %v", dig(m, "output", 0))
	}
	if num(dig(m, "usage", "output_tokens")) != 4 || num(dig(m, "usage", "input_tokens")) == 0 ||
		dig(m, "usage", "input_tokens_details", "cached_tokens") == nil {
		t.Fatalf("usage %v", m["usage"])
	}
	status, got := getAny(t, u+"/v1/responses/"+id)
	if status != 200 || got["id"] != id || got["status"] != "completed" {
		t.Fatalf("GET: %d %v", status, got)
	}
}

// TestResponsesChainHitsCache follows conversations by previous_response_id:
// each prompt starts with the previous prompt and its output, so all of the
// previous prompt's whole blocks come from the prefix cache, whether the
// client repeats its instructions or sends them once.
func TestResponsesChainHitsCache(t *testing.T) {
	_, u := serve(t, fastConfig())
	for _, tc := range []struct {
		name   string
		repeat bool // instructions on every turn, not the first only
	}{{"instructions repeated", true}, {"instructions once", false}} {
		t.Run(tc.name, func(t *testing.T) {
			instructions := strings.Repeat("You are a careful assistant for a router test. ", 8) + tc.name
			prev, prevPrompt := "", 0
			for turn := range 10 {
				body := map[string]any{"model": "sim-model", "max_output_tokens": 5,
					"input": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": fmt.Sprintf("question %d", turn)}}}}}
				if turn == 0 || tc.repeat {
					body["instructions"] = instructions
				}
				if prev != "" {
					body["previous_response_id"] = prev
				}
				b, _ := json.Marshal(body)
				status, m := postAny(t, u+"/v1/responses", string(b))
				if status != 200 {
					t.Fatalf("turn %d: %d %v", turn, status, m)
				}
				in, cached := num(dig(m, "usage", "input_tokens")), num(dig(m, "usage", "input_tokens_details", "cached_tokens"))
				if turn > 0 && cached != prevPrompt/BlockSize*BlockSize {
					t.Fatalf("turn %d: cached %d of %d, want the previous prompt's %d whole blocks", turn, cached, in, prevPrompt/BlockSize)
				}
				if turn > 0 && in <= prevPrompt+5 {
					t.Fatalf("turn %d: prompt %d does not extend the previous %d and its output", turn, in, prevPrompt)
				}
				prev, prevPrompt = m["id"].(string), in
			}
		})
	}
}

func TestResponsesUnknownID404(t *testing.T) {
	_, u := serve(t, fastConfig())
	check := func(what string, status int, m map[string]any) {
		t.Helper()
		if status != 404 || dig(m, "error", "type") != "invalid_request_error" ||
			dig(m, "error", "message") != "Response with id 'resp_never' not found." || num(dig(m, "error", "code")) != 404 {
			t.Errorf("%s: %d %v", what, status, m)
		}
	}
	status, m := postAny(t, u+"/v1/responses", `{"input":"hi","previous_response_id":"resp_never"}`)
	check("previous_response_id", status, m)
	status, m = getAny(t, u+"/v1/responses/resp_never")
	check("GET", status, m)
	status, m = postAny(t, u+"/v1/responses/resp_never/cancel", ``)
	check("cancel", status, m)
}

func TestResponsesStoreBound(t *testing.T) {
	cfg := fastConfig()
	cfg.ResponsesStoreSize = 2
	r, u := serve(t, cfg)
	create := func(body string) string {
		t.Helper()
		status, m := postAny(t, u+"/v1/responses", body)
		if status != 200 {
			t.Fatalf("%d %v", status, m)
		}
		return m["id"].(string)
	}
	body := `{"input":"hi","max_output_tokens":1}`
	a, b := create(body), create(body)
	getAny(t, u+"/v1/responses/"+a) // a is now the most recently used
	c := create(body)
	notStored := create(`{"input":"hi","max_output_tokens":1,"store":false}`)
	for _, tc := range []struct {
		id   string
		want int
	}{{a, 200}, {b, 404}, {c, 200}, {notStored, 404}} {
		if status, _ := getAny(t, u+"/v1/responses/"+tc.id); status != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.id, status, tc.want)
		}
	}
	if n := r.responses.len(); n != 2 {
		t.Fatalf("store holds %d, bound 2", n)
	}
}

func TestResponsesStreamOrder(t *testing.T) {
	_, u := serve(t, fastConfig())
	evs := postStream(t, u+"/v1/responses", `{"input":"hello","max_output_tokens":6,"stream":true}`)
	var types []string
	text := ""
	for i, e := range evs {
		if num(e.data["sequence_number"]) != i {
			t.Fatalf("event %d %s: sequence_number %v", i, e.typ, e.data["sequence_number"])
		}
		if e.typ == "response.output_text.delta" {
			text += e.data["delta"].(string)
			if len(types) > 0 && types[len(types)-1] == e.typ {
				continue
			}
		}
		types = append(types, e.typ)
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(types, " "), want)
	}
	last := evs[len(evs)-1].data["response"]
	if text != OutputText(0, 6) || dig(last, "output", 0, "content", 0, "text") != text || num(dig(last, "usage", "output_tokens")) != 6 {
		t.Fatalf("text %q, completed %v", text, last)
	}
	id := dig(evs[0].data, "response", "id").(string)
	if status, m := getAny(t, u+"/v1/responses/"+id); status != 200 || m["status"] != "completed" {
		t.Fatalf("streamed response not stored: %d %v", status, m)
	}
}

func TestResponsesBackgroundAndCancel(t *testing.T) {
	cfg := fastConfig()
	cfg.Speed = 1 // the long background response is still running when cancelled
	_, u := serve(t, cfg)
	status, m := postAny(t, u+"/v1/responses", `{"input":"hi","max_output_tokens":2000,"background":true}`)
	if status != 200 || m["status"] != "queued" || m["background"] != true {
		t.Fatalf("%d %v", status, m)
	}
	id := m["id"].(string)
	status, m = postAny(t, u+"/v1/responses/"+id+"/cancel", ``)
	if status != 200 || m["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", status, m)
	}
	if _, m := getAny(t, u+"/v1/responses/"+id); m["status"] != "cancelled" {
		t.Fatalf("after cancel: %v", m)
	}
	_, m = postAny(t, u+"/v1/responses", `{"input":"hi","max_output_tokens":1}`)
	status, m = postAny(t, u+"/v1/responses/"+m["id"].(string)+"/cancel", ``)
	if status != 400 || dig(m, "error", "message") != "Cannot cancel a synchronous response." {
		t.Fatalf("cancel of a finished response: %d %v", status, m)
	}
}

func TestResponsesBackgroundCompletes(t *testing.T) {
	_, u := serve(t, fastConfig())
	_, m := postAny(t, u+"/v1/responses", `{"input":"hi","max_output_tokens":3,"background":true}`)
	id := m["id"].(string)
	waitFor(t, func() bool { _, m := getAny(t, u+"/v1/responses/"+id); return m["status"] == "completed" })
	_, m = getAny(t, u+"/v1/responses/"+id)
	if dig(m, "output", 0, "content", 0, "text") != OutputText(0, 3) {
		t.Fatalf("%v", m)
	}
}

// TestBadInputPerPath checks that each new path answers bad input with a
// 400 (unknown model: 404) in its own error shape, naming the member.
func TestBadInputPerPath(t *testing.T) {
	_, u := serve(t, fastConfig())
	cases := []struct {
		path, body string
		status     int
		mention    string
		anthropic  bool
	}{
		{"/v1/responses", `{"model":"sim-model"}`, 400, "input", false},
		{"/v1/responses", `{"input":[]}`, 400, "input", false},
		{"/v1/responses", `{"input":[{"content":"x"}]}`, 400, "input[0].role", false},
		{"/v1/responses", `{"input":[{"type":"image_generation_call"}]}`, 400, "input[0].type", false},
		{"/v1/responses", `{"input":"x","max_output_tokens":0}`, 400, "max_output_tokens", false},
		{"/v1/responses", `{"input":"x","background":true,"store":false}`, 400, "background", false},
		{"/v1/responses", `{"model":"nope","input":"x"}`, 404, "nope", false},
		{"/v1/responses", `{"input":`, 400, "invalid JSON", false},
		{"/v1/messages", `{"messages":[{"role":"user","content":"x"}]}`, 400, "max_tokens", true},
		{"/v1/messages", `{"max_tokens":5,"messages":[]}`, 400, "messages", true},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"robot","content":"x"}]}`, 400, "messages[0].role", true},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, 400, "messages[0].content[0].type", true},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":7}]}`, 400, "messages[0].content", true},
		{"/v1/messages", `{"max_tokens":5,"system":5,"messages":[{"role":"user","content":"x"}]}`, 400, "system", true},
		{"/v1/messages", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, 404, "nope", true},
		{"/v1/messages", `not json`, 400, "invalid JSON", true},
		{"/v1/embeddings", `{"model":"sim-model"}`, 400, "input", false},
		{"/v1/embeddings", `{"input":["a",""]}`, 400, "input[1]", false},
		{"/v1/embeddings", `{"input":"a","encoding_format":"hex"}`, 400, "encoding_format", false},
		{"/v1/embeddings", `{"input":"a","dimensions":0}`, 400, "dimensions", false},
		{"/v1/embeddings", `{"model":"nope","input":"a"}`, 404, "nope", false},
		{"/pooling", `{"input":{}}`, 400, "input", false},
		{"/classify", `{}`, 400, "input", false},
		{"/score", `{"text_1":"a"}`, 400, "text_2", false},
		{"/v1/score", `{"text_1":["a","b"],"text_2":["a","b","c"]}`, 400, "text_1", false},
		{"/rerank", `{"documents":["a"]}`, 400, "query", false},
		{"/v1/rerank", `{"query":"q","documents":[]}`, 400, "documents", false},
		{"/v2/rerank", `{"query":"q","documents":["a"],"top_n":-1}`, 400, "top_n", false},
		{"/v2/rerank", `{"model":"nope","query":"q","documents":["a"]}`, 404, "nope", false},
		{"/tokenize", `{}`, 400, "prompt", false},
		{"/tokenize", `{"model":"nope","prompt":"x"}`, 404, "nope", false},
		{"/detokenize", `{}`, 400, "tokens", false},
		{"/detokenize", `{"tokens":[7]}`, 400, "tokens[0]", false},
	}
	for _, c := range cases {
		resp, b := post(t, u+c.path, c.body)
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.mention) {
			t.Errorf("%s %s: %d %s, want %d naming %q", c.path, c.body, resp.StatusCode, b, c.status, c.mention)
			continue
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		if c.anthropic && (m["type"] != "error" || dig(m, "error", "type") == nil || dig(m, "error", "message") == nil) {
			t.Errorf("%s: not Anthropic's error shape: %s", c.path, b)
		}
		if !c.anthropic && (num(dig(m, "error", "code")) != c.status || dig(m, "error", "type") == nil) {
			t.Errorf("%s: not OpenAI's error shape: %s", c.path, b)
		}
	}
}
