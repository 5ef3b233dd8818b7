package llamafleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// embedModelName is the alias the embedding replicas serve their model under.
const embedModelName = "tiny-embed"

// startEmbedReplicas starts n llama-server processes serving the embedding
// model with --embeddings (one slot, one thread, metrics) and waits until
// each is healthy.
func startEmbedReplicas(t *testing.T, tl tools, n int) []*replica {
	t.Helper()
	rs := make([]*replica, n)
	for i := range rs {
		p, url := startServer(t, fmt.Sprintf("llama-server-embed-%d", i), tl.server, "/health", func(host, port string) []string {
			return []string{"-m", tl.embedModel, "--alias", embedModelName, "--host", host, "--port", port,
				"-t", "1", "-tb", "1", "-np", "1", "-c", "2048", "--embeddings",
				"--metrics", "--no-webui", "--no-warmup"}
		})
		rs[i] = &replica{proc: p, url: url}
	}
	return rs
}

// post sends body to url and returns the status, the backend header and
// the body.
func post(t *testing.T, url string, body any) (int, string, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := client.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("X-Prefixgate-Backend"), out
}

// TestEmbeddingsAndTokenizeThroughRouter: two llama-server replicas serve
// the tiny embedding model behind `prefixgate serve`. /v1/embeddings and
// /tokenize through the router answer 200 with the body the replica that
// served them gives the same request directly, byte for byte; a path
// llama-server does not serve is the router's 501 naming the path and
// the engine.
func TestEmbeddingsAndTokenizeThroughRouter(t *testing.T) {
	tl := setup(t)
	rs := startEmbedReplicas(t, tl, 2)
	base := startRouter(t, tl, rs, "prefixgate-embed")
	byURL := map[string]string{}
	for _, r := range rs {
		byURL[strings.TrimPrefix(r.url, "http://")] = r.url
		byURL[r.url] = r.url
	}
	doc := strings.Repeat("The tiny embedding model reads this document. ", 8)
	reqs := []struct {
		path string
		body map[string]any
	}{
		{"/v1/embeddings", map[string]any{"model": embedModelName, "input": []string{doc + "first", doc + "second"}}},
		{"/v1/embeddings", map[string]any{"model": embedModelName, "input": doc + "third", "encoding_format": "float"}},
		{"/tokenize", map[string]any{"model": embedModelName, "content": doc}},
	}
	for _, rq := range reqs {
		status, backend, got := post(t, base+rq.path, rq.body)
		if status != http.StatusOK {
			t.Fatalf("%s through the router: status %d: %.300s", rq.path, status, got)
		}
		direct, ok := byURL[backend]
		if !ok {
			t.Fatalf("%s: X-Prefixgate-Backend %q is none of the replicas", rq.path, backend)
		}
		status, _, want := post(t, direct+rq.path, rq.body)
		if status != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("%s: the router's answer differs from the replica's (status %d):\n router  %.200s\n replica %.200s", rq.path, status, got, want)
		}
		checkShape(t, rq.path, got)
	}
	waitEngine(t, base, len(rs))
	for _, path := range []string{"/pooling", "/v1/audio/translations", "/version"} {
		method, body := "POST", `{"model":"`+embedModelName+`","input":"x"}`
		ct := "application/json"
		switch path {
		case "/version":
			method, body = "GET", ""
		case "/v1/audio/translations":
			ct = "multipart/form-data; boundary=b"
			body = "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + embedModelName + "\r\n--b--\r\n"
		}
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := "llama.cpp's llama-server does not serve " + path
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(raw), want) || !strings.Contains(string(raw), "endpoint_not_supported") {
			t.Errorf("%s %s: status %d, want 501 endpoint_not_supported naming %q: %s", method, path, resp.StatusCode, want, raw)
		}
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
}

// waitEngine waits until the router has detected llama.cpp on n backends
// (from the llamacpp: metrics of their first scrape, which starts with the
// router), as prefixgate_backend_cache_tokens's engine label shows.
func waitEngine(t *testing.T, base string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Count(string(raw), `engine="llamacpp"`) >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router did not detect llama.cpp on %d backends within 30s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkShape checks llama-server's shapes: an OpenAI embedding list with
// one 128-wide vector per input, or a token list.
func checkShape(t *testing.T, path string, raw []byte) {
	t.Helper()
	var v struct {
		Object string `json:"object"`
		Data   []struct {
			Object    string    `json:"object"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
		Tokens []int `json:"tokens"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v: %.200s", path, err, raw)
	}
	switch path {
	case "/v1/embeddings":
		if v.Object != "list" || len(v.Data) == 0 || v.Usage.PromptTokens == 0 {
			t.Errorf("%s: not an embedding list: %.200s", path, raw)
		}
		for _, d := range v.Data {
			if d.Object != "embedding" || len(d.Embedding) != 128 {
				t.Errorf("%s: an item of %d dimensions, object %q", path, len(d.Embedding), d.Object)
			}
		}
	case "/tokenize":
		if len(v.Tokens) == 0 {
			t.Errorf("%s: no tokens: %.200s", path, raw)
		}
	}
}
