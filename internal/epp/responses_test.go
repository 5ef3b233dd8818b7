package epp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/route"
)

// relayed is one request as a full-duplex gateway ran it through the
// picker and a real replica.
type relayed struct {
	dest    string // the picked endpoint; "" when the picker answered
	status  int
	body    []byte
	refusal *extprocv3.ImmediateResponse
}

// relay plays the gateway in FULL_DUPLEX_STREAMED mode both ways: it sends
// the request to the picker, forwards the picker's body to the endpoint it
// named, and streams the replica's answer back through the picker in
// pieces of piece bytes, checking that each comes back unchanged.
func (h *harness) relay(t *testing.T, method, path string, body []byte, piece int) relayed {
	t.Helper()
	s, err := h.client.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseSend()
	rh := hdrs(path)
	rh.Headers.Headers[0].RawValue = []byte(method)
	rh.EndOfStream = body == nil
	fd := filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	if err := s.Send(&extprocv3.ProcessingRequest{ProtocolConfig: protocol(fd, fd),
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: rh}}); err != nil {
		t.Fatal(err)
	}
	if body != nil {
		if err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}); err != nil {
			t.Fatal(err)
		}
	}
	r := recv(t, s)
	if ir := r.GetImmediateResponse(); ir != nil {
		return relayed{refusal: ir, status: int(ir.GetStatus().GetCode()), body: ir.GetBody()}
	}
	dest, _ := headerValue(r.GetRequestHeaders().GetResponse().GetHeaderMutation(), DestinationHeader)
	var sent []byte
	for body != nil {
		sr := recv(t, s).GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		sent = append(sent, sr.GetBody()...)
		if sr.GetEndOfStream() {
			break
		}
	}
	req, _ := http.NewRequest(method, "http://"+dest+path, bytes.NewReader(sent))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, dest, err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte(strconv.Itoa(resp.StatusCode))},
			{Key: "content-type", RawValue: []byte(resp.Header.Get("Content-Type"))}}}}}}); err != nil {
		t.Fatal(err)
	}
	recv(t, s)
	var back []byte
	for rest := answer; ; {
		n := min(len(rest), piece)
		end := n == len(rest)
		if err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: rest[:n], EndOfStream: end}}}); err != nil {
			t.Fatal(err)
		}
		back = append(back, recv(t, s).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()...)
		rest = rest[n:]
		if end {
			break
		}
	}
	if !bytes.Equal(back, answer) {
		t.Fatalf("the answer came back changed:\n%q\nwant\n%q", back, answer)
	}
	return relayed{dest: dest, status: resp.StatusCode, body: answer}
}

func responsesBody(t *testing.T, m map[string]any) []byte {
	t.Helper()
	m["model"], m["max_output_tokens"] = "vllmsim/tiny", 2
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStoredResponsesFollowTheirEndpoint: the picker learns each response's
// id from the answer, plain or streamed, and sends a follow-up, a GET and a
// cancel naming it to the endpoint that stored it, whatever the follow-up's
// prefix; the replica's own store confirms it by answering.
func TestStoredResponsesFollowTheirEndpoint(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	for _, stream := range []bool{false, true} {
		first := h.relay(t, "POST", "/v1/responses", responsesBody(t, map[string]any{
			"input": "conversation start " + strconv.FormatBool(stream), "stream": stream}), 7)
		if first.status != http.StatusOK {
			t.Fatalf("first response: %d %s", first.status, first.body)
		}
		prev := responseID(t, first.body, stream)
		home := first.dest
		for i := range 6 {
			// A different input each time: only the id can keep the chain on
			// its endpoint.
			next := h.relay(t, "POST", "/v1/responses", responsesBody(t, map[string]any{
				"input": "follow-up " + strconv.Itoa(i) + strings.Repeat(" other words", i*20), "previous_response_id": prev, "stream": stream}), 5)
			if next.status != http.StatusOK || next.dest != home {
				t.Fatalf("follow-up %d (stream %v) naming %s: %d on %s, want 200 on %s: %s", i, stream, prev, next.status, next.dest, home, next.body)
			}
			prev, home = responseID(t, next.body, stream), next.dest
		}
		got := h.relay(t, "GET", "/v1/responses/"+prev, nil, 64)
		if got.status != http.StatusOK || got.dest != home || !bytes.Contains(got.body, []byte(prev)) {
			t.Fatalf("GET %s: %d on %s, want 200 on %s: %s", prev, got.status, got.dest, home, got.body)
		}
		if got := h.relay(t, "GET", "/v1/responses/"+strings.Replace(prev, "_", "%5F", 1), nil, 64); got.dest != home {
			t.Fatalf("GET of %s with an escaped path went to %q, want %s", prev, got.dest, home)
		}
		if c := h.relay(t, "POST", "/v1/responses/"+prev+"/cancel", nil, 64); c.dest != home {
			t.Fatalf("cancel %s went to %s, want %s", prev, c.dest, home)
		}
	}
	waitInFlight(t, h, 0)
}

// responseID is a Responses answer's id: its "id", or its stream's
// response.created event's.
func responseID(t *testing.T, body []byte, stream bool) string {
	t.Helper()
	if !stream {
		var v struct{ ID string }
		if json.Unmarshal(body, &v) != nil || v.ID == "" {
			t.Fatalf("answer without an id: %s", body)
		}
		return v.ID
	}
	if id := createdID(body); id != "" {
		return id
	}
	t.Fatalf("stream without response.created: %s", body)
	return ""
}

// TestUnknownStoredResponseIs404: a follow-up, GET or cancel naming an id
// the picker never learned is answered by the picker, 404 in OpenAI's
// shape, and reaches no endpoint.
func TestUnknownStoredResponseIs404(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	cases := []struct {
		method, path, param string
		body                []byte
	}{
		{"POST", "/v1/responses", "previous_response_id", responsesBody(t, map[string]any{"input": "hi", "previous_response_id": "resp_never"})},
		{"GET", "/v1/responses/resp_never", "", nil},
		{"POST", "/v1/responses/resp_never/cancel", "", nil},
	}
	for _, c := range cases {
		r := h.relay(t, c.method, c.path, c.body, 64)
		var e struct {
			Error struct {
				Message, Type, Code string
				Param               *string
			}
		}
		if r.refusal == nil || r.status != http.StatusNotFound || json.Unmarshal(r.body, &e) != nil ||
			e.Error.Code != "response_not_found" || !strings.Contains(e.Error.Message, "resp_never") {
			t.Fatalf("%s %s: %d %s (picked %q), want the picker's 404", c.method, c.path, r.status, r.body, r.dest)
		}
		if (e.Error.Param == nil) != (c.param == "") || (e.Error.Param != nil && *e.Error.Param != c.param) {
			t.Fatalf("%s %s: param %v, want %q", c.method, c.path, e.Error.Param, c.param)
		}
	}
	waitInFlight(t, h, 0)
}

// TestStoredResponseOnAGoneEndpointIs404: an id stored on an endpoint that
// is no longer a healthy member is a 404 naming it, never another endpoint.
func TestStoredResponseOnAGoneEndpointIs404(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	h.fleet.stored.Put("resp_elsewhere", "127.0.0.1:1")
	r := h.relay(t, "POST", "/v1/responses", responsesBody(t, map[string]any{"input": "hi", "previous_response_id": "resp_elsewhere"}), 64)
	if r.refusal == nil || r.status != http.StatusNotFound || !bytes.Contains(r.body, []byte("127.0.0.1:1")) {
		t.Fatalf("id on a gone endpoint: %d %s (picked %q)", r.status, r.body, r.dest)
	}
}

// TestLearnGivesUpAfterTheHead: an answer whose beginning holds no id is
// not kept past idHead bytes.
func TestLearnGivesUpAfterTheHead(t *testing.T) {
	x := &exchange{p: &Picker{metrics: newMetrics()}, learnID: true, picked: true, status: http.StatusOK, sse: true}
	for range 3 {
		x.learn(bytes.Repeat([]byte("data: {}\n\n"), idHead/10+1), false)
	}
	if !x.learned || x.head != nil {
		t.Fatalf("after %d bytes without an id: learned %v, head %d bytes", 3*idHead, x.learned, len(x.head))
	}
}
