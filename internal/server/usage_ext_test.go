package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/tidwall/gjson"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/internal/server"
)

// usageEngine answers chat completions the way one engine shapes its
// usage: llama.cpp (usage first, then id and timings), SGLang (usage with
// reasoning_tokens, then metadata) or vLLM. Every answer reports prompt
// and cached tokens; a stream carries them in a final chunk with empty
// choices only when stream_options.include_usage asks, as engines do.
func usageEngine(t *testing.T, shape string, prompt, cached int) *httptest.Server {
	t.Helper()
	usage := fmt.Sprintf(`{"completion_tokens":2,"prompt_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`, prompt, prompt+2, cached)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			switch shape {
			case "llamacpp":
				fmt.Fprintf(w, `{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":"ok"}}],"created":1,"model":"m","object":"chat.completion","usage":%s,"id":"c1","timings":{"cache_n":%d,"prompt_n":%d}}`, usage, cached, prompt-cached)
			case "sglang":
				fmt.Fprintf(w, `{"id":"s1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok","reasoning_content":null},"finish_reason":"length","matched_stop":null}],"usage":%s,"metadata":{"weight_version":"default"}}`, strings.Replace(usage, "}}", `},"reasoning_tokens":0}`, 1))
			default:
				fmt.Fprintf(w, `{"id":"v1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],"usage":%s}`, usage)
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 40 { // enough events that the usage chunk lies past the first buffer
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token %d %s\"},\"finish_reason\":null}]}\n\n", i, strings.Repeat("x", 900))
		}
		if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[],\"usage\":%s}\n\n", usage)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// routerCounters reads prefixgate_prompt_tokens_total and
// prefixgate_cached_prompt_tokens_total per backend from the router's
// /metrics.
func routerCounters(t *testing.T, base string) (prompt, cached map[string]float64) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	prompt, cached = map[string]float64{}, map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for name, into := range map[string]map[string]float64{"prefixgate_prompt_tokens_total": prompt, "prefixgate_cached_prompt_tokens_total": cached} {
			rest, ok := strings.CutPrefix(line, name+`{backend="`)
			if !ok {
				continue
			}
			backend, value, ok := strings.Cut(rest, `"} `)
			v, err := strconv.ParseFloat(value, 64)
			if !ok || err != nil {
				t.Fatalf("metric line %q", line)
			}
			into[backend] = v
		}
	}
	return prompt, cached
}

// TestUsageReachesMetrics sends unary and streamed requests over REST and
// Connect to backends shaped like llama.cpp, SGLang and vLLM and checks
// that the router's counters are exactly the sum of what each backend
// reported for the answers it served.
func TestUsageReachesMetrics(t *testing.T) {
	shapes := map[string][2]int{"llamacpp": {300, 256}, "sglang": {500, 128}, "vllm": {700, 0}}
	byHost := map[string]string{}
	var urls []string
	for shape, n := range shapes {
		u := usageEngine(t, shape, n[0], n[1]).URL
		urls = append(urls, u)
		byHost[strings.TrimPrefix(u, "http://")] = shape
	}
	srv, err := server.New(server.Config{Backends: urls}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(t, srv)
	defer stop()
	h := httptest.NewServer(srv.Handler())
	defer h.Close()
	base := h.URL

	served := map[string]int{} // backend -> answers that reported usage
	post := func(body string) {
		t.Helper()
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d err %v body %.200s", resp.StatusCode, err, raw)
		}
		if strings.Contains(body, "include_usage") || !strings.Contains(body, `"stream"`) {
			served[resp.Header.Get(server.BackendHeader)]++
		}
	}
	client := prefixgatev1connect.NewInferenceServiceClient(http.DefaultClient, base)
	for i := range 24 {
		msgs := fmt.Sprintf(`[{"role":"user","content":"question %d"}]`, i)
		switch i % 4 {
		case 0:
			post(`{"model":"m","messages":` + msgs + `,"max_tokens":2}`)
		case 1:
			post(`{"model":"m","messages":` + msgs + `,"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`)
		case 2:
			// A stream that does not ask for usage reports none: it
			// must not count.
			post(`{"model":"m","messages":` + msgs + `,"max_tokens":2,"stream":true}`)
		case 3:
			in := &pb.ChatInput{Model: "m", Messages: []*pb.Message{{Role: "user", Content: fmt.Sprintf("connect %d", i)}}}
			res, err := client.Chat(context.Background(), connect.NewRequest(&pb.ChatRequest{Input: in}))
			if err != nil {
				t.Fatal(err)
			}
			served[res.Msg.GetRouting().GetBackend()]++
			st, err := client.ChatStream(context.Background(), connect.NewRequest(&pb.ChatStreamRequest{Input: in}))
			if err != nil {
				t.Fatal(err)
			}
			backend := ""
			for st.Receive() {
				if r := st.Msg().GetRouting(); r != nil {
					backend = r.GetBackend()
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			served[backend]++
		}
	}
	total := 0
	for _, n := range served {
		total += n
	}
	if total != 6*4 { // per round of four: unary, stream with usage, Connect unary and stream
		t.Fatalf("served %v: %d answers with usage, want %d", served, total, 6*4)
	}
	// An answer's exchange closes as its handler returns, which may be just
	// after the client has read a body of known length: poll, bounded.
	var mismatch string
	for range 500 {
		prompt, cached := routerCounters(t, base)
		mismatch = ""
		for backend, n := range served {
			want := shapes[byHost[backend]]
			if prompt[backend] != float64(n*want[0]) || cached[backend] != float64(n*want[1]) {
				mismatch += fmt.Sprintf("%s (%s) served %d answers with usage: counters prompt %v cached %v, want %d and %d\n",
					backend, byHost[backend], n, prompt[backend], cached[backend], n*want[0], n*want[1])
			}
		}
		if len(prompt) != len(served) {
			mismatch += fmt.Sprintf("counters for %v, answers from %v\n", prompt, served)
		}
		if mismatch == "" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal(mismatch)
}

// TestEngineAndCapacityMetric: a backend that answers like llama-server
// without --metrics is detected from /props and its capacity
// (n_ctx per slot × slots) published with its engine.
func TestEngineAndCapacityMetric(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotImplemented)
	})
	mux.HandleFunc("GET /props", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"default_generation_settings":{"params":{},"n_ctx":1024},"total_slots":3,"model_path":"/m.gguf"}`)
	})
	llama := httptest.NewServer(mux)
	defer llama.Close()
	srv, err := server.New(server.Config{Backends: []string{llama.URL}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer serveInBackground(t, srv)()
	h := httptest.NewServer(srv.Handler())
	defer h.Close()
	want := fmt.Sprintf(`prefixgate_backend_cache_tokens{backend=%q,engine="llamacpp"} 3072`, strings.TrimPrefix(llama.URL, "http://"))
	var last string
	for range 500 { // bounded: the router publishes every second
		resp, err := http.Get(h.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(raw), want) {
			return
		}
		last = string(raw)
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s in\n%s", want, last)
}
