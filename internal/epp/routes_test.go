package epp

import (
	"context"
	"encoding/json"
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/route"
)

// TestRouteTablePathsAreKeyed: the picker keys the JSON routes of the
// route table (Responses, Messages, pooling) as the server does: a
// canonical body, a key, and one endpoint for bodies sharing a long
// prefix.
func TestRouteTablePathsAreKeyed(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	doc := ""
	for range 200 {
		doc += "A long shared document. "
	}
	bodies := map[string]func(q string) any{
		"/v1/responses": func(q string) any { return map[string]any{"model": "vllmsim/tiny", "input": doc + q} },
		"/v1/messages": func(q string) any {
			return map[string]any{"model": "vllmsim/tiny", "max_tokens": 4, "messages": []any{map[string]any{"role": "user", "content": doc + q}}}
		},
		"/v1/embeddings": func(q string) any { return map[string]any{"model": "vllmsim/tiny", "input": doc + q} },
	}
	for path, body := range bodies {
		dests := map[string]bool{}
		for _, q := range []string{"one?", "two?"} {
			b, _ := json.Marshal(body(q))
			s, err := h.client.Process(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Send(&extprocv3.ProcessingRequest{ProtocolConfig: protocol(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE),
				Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(path)}})
			recv(t, s)
			_ = s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: b, EndOfStream: true}}})
			r := recv(t, s)
			common := r.GetRequestBody().GetResponse()
			key, ok := headerValue(common.GetHeaderMutation(), pipeline.KeyHeader)
			dest, _ := headerValue(common.GetHeaderMutation(), DestinationHeader)
			if !ok || key == "" || len(common.GetBodyMutation().GetBody()) == 0 {
				t.Errorf("%s: not keyed: %v", path, r)
			}
			dests[dest] = true
			_ = s.CloseSend()
			_, _ = s.Recv()
		}
		if len(dests) != 1 {
			t.Errorf("%s: bodies sharing a long prefix went to %v", path, dests)
		}
	}
	waitInFlight(t, h, 0)
}

// TestMessagesRefusalsAreAnthropics: the picker's refusals on
// /v1/messages are in Anthropic's error shape.
func TestMessagesRefusalsAreAnthropics(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	s, err := h.client.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Send(&extprocv3.ProcessingRequest{ProtocolConfig: protocol(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE),
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs("/v1/messages")}})
	recv(t, s)
	_ = s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte("{\"model\": \"\x01\"}"), EndOfStream: true}}})
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	ir := recv(t, s).GetImmediateResponse()
	if json.Unmarshal(ir.GetBody(), &e) != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
		t.Errorf("refusal on /v1/messages: %s", ir.GetBody())
	}
}
