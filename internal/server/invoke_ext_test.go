package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/internal/server"
)

// invoker calls InferenceService.Invoke with one client, and returns the
// answer or the error's code name and message.
type invoker func(req *pb.InvokeRequest) (res *pb.InvokeResponse, code, msg string)

// invokers are a grpc-go client and a Connect client of the router at
// base.
func invokers(t *testing.T, base string) map[string]invoker {
	conn, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := prefixgatev1connect.NewInferenceServiceClient(http.DefaultClient, base)
	return map[string]invoker{
		"grpc-go": func(req *pb.InvokeRequest) (*pb.InvokeResponse, string, string) {
			res := new(pb.InvokeResponse)
			if err := conn.Invoke(context.Background(), prefixgatev1connect.InferenceServiceInvokeProcedure, req, res); err != nil {
				st := status.Convert(err)
				return nil, connect.Code(st.Code()).String(), st.Message()
			}
			return res, "", ""
		},
		"connect": func(req *pb.InvokeRequest) (*pb.InvokeResponse, string, string) {
			res, err := client.Invoke(context.Background(), connect.NewRequest(req))
			if err != nil {
				return nil, connect.CodeOf(err).String(), err.Error()
			}
			return res.Msg, "", ""
		},
	}
}

// TestInvokeEveryJSONPath sends a body of each JSON path through Invoke,
// with grpc-go and with Connect, to a vllmsim fleet: each is answered
// raw with the path's own answer, routed as the REST path routes it.
func TestInvokeEveryJSONPath(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	doc := strings.Repeat("a long shared system prompt about refunds. ", 40)
	cases := []struct {
		path, body string
		want       string // a member the path's answer has
		keyed      bool
	}{
		{"", `{"inputs": "` + doc + `", "parameters": {"max_new_tokens": 3}}`, "generated_text", true},
		{"/invocations", `{"inputs": "hello", "parameters": {"max_new_tokens": 3}}`, "generated_text", true},
		{"/v1/chat/completions", `{"model": "vllmsim/tiny", "messages": [{"role": "system", "content": "` + doc + `"}, {"role": "user", "content": "hi"}], "max_tokens": 3}`, "choices", true},
		{"/v1/completions", `{"model": "vllmsim/tiny", "prompt": "` + doc + `", "max_tokens": 3}`, "choices", true},
		{"/v1/responses", `{"model": "vllmsim/tiny", "instructions": "` + doc + `", "input": "hi", "max_output_tokens": 3}`, "output", true},
		{"/v1/messages", `{"model": "vllmsim/tiny", "system": "` + doc + `", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}`, "content", true},
		{"/v1/embeddings", `{"model": "vllmsim/tiny", "input": "` + doc + `"}`, "data", true},
		{"/pooling", `{"model": "vllmsim/tiny", "input": "some text"}`, "data", true},
		{"/classify", `{"model": "vllmsim/tiny", "input": "some text"}`, "data", true},
		{"/score", `{"model": "vllmsim/tiny", "text_1": "refund policy", "text_2": ["the refund policy", "shipping"]}`, "data", true},
		{"/v1/score", `{"model": "vllmsim/tiny", "text_1": "refund policy", "text_2": ["the refund policy"]}`, "data", true},
		{"/rerank", `{"model": "vllmsim/tiny", "query": "refund policy", "documents": ["the refund policy", "shipping"]}`, "results", true},
		{"/v1/rerank", `{"model": "vllmsim/tiny", "query": "refund policy", "documents": ["shipping"]}`, "results", true},
		{"/v2/rerank", `{"model": "vllmsim/tiny", "query": "refund policy", "documents": ["shipping"], "top_n": 1}`, "results", true},
		{"/tokenize", `{"model": "vllmsim/tiny", "prompt": "hello world"}`, "tokens", false},
	}
	for name, invoke := range invokers(t, base) {
		t.Run(name, func(t *testing.T) {
			for _, c := range cases {
				res, code, msg := invoke(&pb.InvokeRequest{Path: c.path, Body: []byte(c.body)})
				if code != "" {
					t.Errorf("%s: %s %s", c.path, code, msg)
					continue
				}
				var got map[string]json.RawMessage
				if err := json.Unmarshal(res.GetBody(), &got); err != nil || got[c.want] == nil {
					t.Errorf("%s: answer %.300s (%v); want a %q member", c.path, res.GetBody(), err, c.want)
				}
				r := res.GetRouting()
				if r.GetBackend() == "" || c.keyed && len(r.GetKey()) != 16 {
					t.Errorf("%s: routing %v; want a backend and, keyed, a key", c.path, r)
				}
			}
			// Each keyed body has the key its REST path gives it.
			for _, c := range cases {
				if !c.keyed || c.path == "" {
					continue
				}
				res, code, _ := invoke(&pb.InvokeRequest{Path: c.path, Body: []byte(c.body)})
				req, _ := http.NewRequest(http.MethodPost, base+c.path, strings.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if want := resp.Header.Get(server.KeyHeader); code != "" || res.GetRouting().GetKey() != want {
					t.Errorf("%s: Invoke's key %q; the REST path's %q", c.path, res.GetRouting().GetKey(), want)
				}
			}
			// The tokenizer's answer detokenizes back.
			res, code, msg := invoke(&pb.InvokeRequest{Path: "/tokenize", Body: []byte(`{"model": "vllmsim/tiny", "prompt": "round trip"}`)})
			if code != "" {
				t.Fatalf("tokenize: %s %s", code, msg)
			}
			var tok struct {
				Tokens []int64 `json:"tokens"`
			}
			_ = json.Unmarshal(res.GetBody(), &tok)
			b, _ := json.Marshal(map[string]any{"model": "vllmsim/tiny", "tokens": tok.Tokens})
			res, code, msg = invoke(&pb.InvokeRequest{Path: "/detokenize", Body: b})
			if code != "" || !strings.Contains(string(res.GetBody()), "round trip") {
				t.Errorf("detokenize: %s %s %s; want the prompt back", code, msg, res.GetBody())
			}
		})
	}
}

// TestInvokeResponsesFollowUps: Responses chains sent through Invoke (and
// begun on the REST path) follow previous_response_id to the replica that
// stored each response; an id the router does not know is NotFound.
func TestInvokeResponsesFollowUps(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	for name, invoke := range invokers(t, base) {
		t.Run(name, func(t *testing.T) {
			for c := range 6 {
				prev, where := "", ""
				if c%2 == 1 { // begun on the REST path
					status, id, backend, raw := respond(t, base, map[string]any{"model": simModel, "input": fmt.Sprintf("%s chain %d", name, c), "max_output_tokens": 3}, false)
					if status != http.StatusOK {
						t.Fatalf("REST: %d %s", status, raw)
					}
					prev, where = id, backend
				}
				for turn := range 5 {
					body := map[string]any{"model": simModel, "input": fmt.Sprintf("%s chain %d turn %d", name, c, turn), "max_output_tokens": 3}
					if prev != "" {
						body["previous_response_id"] = prev
					}
					b, _ := json.Marshal(body)
					res, code, msg := invoke(&pb.InvokeRequest{Path: "/v1/responses", Body: b})
					if code != "" {
						t.Fatalf("chain %d turn %d: %s %s", c, turn, code, msg)
					}
					if got := res.GetRouting().GetBackend(); where != "" && got != where {
						t.Errorf("chain %d turn %d: on %s; want %s, which stored %s", c, turn, got, where, prev)
					}
					var out struct {
						ID string `json:"id"`
					}
					if json.Unmarshal(res.GetBody(), &out); out.ID == "" {
						t.Fatalf("chain %d turn %d: no id in %.300s", c, turn, res.GetBody())
					}
					prev, where = out.ID, res.GetRouting().GetBackend()
				}
				// The last id, learned from Invoke, serves the REST GET.
				resp, err := http.Get(base + "/v1/responses/" + prev)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get(server.BackendHeader) != where {
					t.Errorf("GET %s: %d on %s; want 200 on %s", prev, resp.StatusCode, resp.Header.Get(server.BackendHeader), where)
				}
			}
			_, code, msg := invoke(&pb.InvokeRequest{Path: "/v1/responses", Body: []byte(`{"model": "vllmsim/tiny", "input": "x", "previous_response_id": "resp_unknown"}`)})
			if code != "not_found" || !strings.Contains(msg, "resp_unknown") {
				t.Errorf("unknown previous_response_id: %s %q; want not_found naming it", code, msg)
			}
		})
	}
}

// TestInvokeRefusesOtherPaths: a path that is not a JSON path of the
// table, or a stream outside /invocations, is invalid_argument naming the
// path and listing the allowed ones; nothing is forwarded.
func TestInvokeRefusesOtherPaths(t *testing.T) {
	base := startRouter(t, 1, server.Config{})
	for name, invoke := range invokers(t, base) {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/v1/nope", "/v1/models", "/version", "/v1/audio/transcriptions", "/v1/responses/resp_1", "/v1/explain", "v1/chat/completions", "/v1/chat/completions?x=1"} {
				_, code, msg := invoke(&pb.InvokeRequest{Path: path, Body: []byte(`{"model": "vllmsim/tiny", "prompt": "x"}`)})
				if code != "invalid_argument" || !strings.Contains(msg, fmt.Sprintf("%q", path)) || !strings.Contains(msg, "/v1/messages") || !strings.Contains(msg, "/tokenize") {
					t.Errorf("path %q: %s %q; want invalid_argument naming it and listing the paths", path, code, msg)
				}
				if _, list, _ := strings.Cut(msg, "use one of"); strings.Contains(list, "/v1/explain") || strings.Contains(list, "/v1/models") {
					t.Errorf("path %q: %q lists a path Invoke does not take", path, msg)
				}
			}
			_, code, msg := invoke(&pb.InvokeRequest{Path: "/v1/messages", Body: []byte(`{"model": "vllmsim/tiny", "stream": true, "messages": [{"role": "user", "content": "x"}], "max_tokens": 3}`)})
			if code != "invalid_argument" || !strings.Contains(msg, "stream") {
				t.Errorf("stream: %s %q; want invalid_argument naming stream", code, msg)
			}
			_, code, msg = invoke(&pb.InvokeRequest{Path: "/v1/messages", Body: []byte(`{"model": "vllmsim/tiny", "messages": [{"role": "user", "content": "x"}], "messages": []}`)})
			if code != "invalid_argument" || !strings.Contains(msg, "offset") {
				t.Errorf("duplicate member: %s %q; want invalid_argument naming the offset", code, msg)
			}
		})
	}
}
