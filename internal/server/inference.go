package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/backends"
	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/internal/h1front"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// inferenceService implements prefixgate.v1.InferenceService on top of the
// same pipeline as the REST proxy.
type inferenceService struct{ s *Server }

func invalidField(field, what string) error {
	return &pipeline.Error{Status: http.StatusBadRequest, Code: "invalid_field", Message: field + " " + what}
}

// routingOf is the routing info an RPC answer carries, for a pick
// (Decision) or a dry run (Explanation).
func routingOf(backend string, r route.Reason, distance int, info normalize.RouteInfo) *pb.Routing {
	return &pb.Routing{Backend: backend, Decision: decisionProtos[r], Key: info.KeyHex(), SpillDistance: int32(distance)}
}

// decisionProtos is each route.Reason's proto value; a reason missing here
// reaches clients as UNSPECIFIED (TestEveryReasonHasADecision).
var decisionProtos = map[route.Reason]pb.Decision{
	route.ReasonAffinity:         pb.Decision_DECISION_AFFINITY,
	route.ReasonSpill:            pb.Decision_DECISION_SPILL,
	route.ReasonSpillChain:       pb.Decision_DECISION_SPILL_CHAIN,
	route.ReasonLeastOutstanding: pb.Decision_DECISION_LEAST_OUTSTANDING,
	route.ReasonRandom:           pb.Decision_DECISION_RANDOM,
	route.ReasonPrefixMatch:      pb.Decision_DECISION_PREFIX_MATCH,
}

// usageProto reads an OpenAI usage object; nil when the answer has none.
func usageProto(u gjson.Result) *pb.Usage {
	if !u.Exists() || u.Type == gjson.Null {
		return nil
	}
	return &pb.Usage{PromptTokens: u.Get("prompt_tokens").Int(), CompletionTokens: u.Get("completion_tokens").Int(),
		TotalTokens: u.Get("total_tokens").Int(), CachedTokens: u.Get("prompt_tokens_details.cached_tokens").Int()}
}

// answer is what an OpenAI response or stream chunk says, from one walk.
type answer struct {
	text, finishReason string
	// textSeen says the text was there as a string or null (null: a tool
	// call's message, whose record carries no text).
	textSeen bool
	// index is the first choice's index (0 when absent): stream chunks of
	// several choices each carry one.
	index int64
	// usage and metaInfo are the top-level members (SGLang's native answers
	// carry meta_info), unread beyond where they are.
	usage, metaInfo gjson.Result
}

// parseAnswer reads the first choice's text (at textPath inside it, none
// when ""), index and finish reason, and where the usage and meta_info
// members are, of an OpenAI response or chunk, in one walk of the top level,
// so a stream chunk is not scanned once per field and again for its usage.
// Of a member that appears twice, the first counts, as with gjson.Get.
func parseAnswer(raw []byte, textPath string) answer {
	var a answer
	var choices, usage, meta bool
	gjson.ParseBytes(raw).ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "choices" && !choices:
			choices = true
			a.readChoice(v.Get("0"), textPath)
		case k.Str == "usage" && !usage:
			usage = true
			a.usage = v
		case k.Str == "meta_info" && !meta:
			meta = true
			a.metaInfo = v
		}
		return true
	})
	return a
}

// readChoice reads a choice's text (at textPath), finish reason and index
// in one walk of its members.
func (a *answer) readChoice(c gjson.Result, textPath string) {
	head, rest, _ := strings.Cut(textPath, ".")
	var text, finish, index bool
	c.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "index" && !index:
			index, a.index = true, v.Int()
		case k.Str == "finish_reason" && !finish:
			finish, a.finishReason = true, v.String()
		case k.Str == head && head != "" && !text:
			text = true
			if rest != "" {
				v = v.Get(rest)
			}
			a.text, a.textSeen = v.String(), v.Type == gjson.String || (v.Type == gjson.Null && v.Exists())
		}
		return true
	})
}

// unary runs one non-streaming request through the pipeline and returns the
// backend's JSON answer and what it says, read once: its usage for the
// router and metrics and, for chat, its text, whose blocks the prefix index
// learns as it does for the REST proxy's plain answers.
// rt is the REST route the body is for (nil: path in mode, pinned by
// nothing).
func (is inferenceService) unary(ctx context.Context, routeName string, rt *routes.Route, path string, mode normalize.Mode, body []byte, group string, hdr http.Header, out http.Header) ([]byte, answer, *pb.Routing, error) {
	s := is.s
	ctx, cancel := h1front.WithRequestTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	h1front.BodyRead(ctx) // the message is decoded
	x, err := s.openRoute(ctx, rt, path, mode, body, group, hdr, out)
	if err != nil {
		s.record(routeName, nil, pipeline.Status(err))
		return nil, answer{}, nil, connectError(err)
	}
	defer x.close()
	s.record(routeName, x, x.resp.StatusCode)
	raw, err := readAll(x.resp.Body)
	if err != nil {
		x.err = err
		return nil, answer{}, nil, connectError(upstreamError(err))
	}
	if x.resp.StatusCode/100 != 2 {
		return nil, answer{}, nil, connectError(backendStatusError(x.resp.StatusCode, raw))
	}
	if x.learnID {
		x.learnResponseID(raw) // before the client can name it
	}
	a := parseAnswer(raw, textPath(mode, false))
	if x.b != nil {
		if a.usage.IsObject() || a.metaInfo.IsObject() {
			x.usage = x.b.EventUsage([]byte(a.usage.Raw), []byte(a.metaInfo.Raw))
		}
		if a.textSeen && len(x.info.Blocks) > 0 && mode == normalize.ModeChat {
			x.answer = x.info.AnswerBlocks([]byte(a.text))
		}
	}
	return raw, a, routingOf(x.d.Backend, x.d.Reason, x.d.Distance, x.info), nil
}

func (is inferenceService) Chat(ctx context.Context, req *connect.Request[pb.ChatRequest]) (*connect.Response[pb.ChatResponse], error) {
	body, err := chatBody(req.Msg.GetInput(), false)
	if err != nil {
		return nil, connectError(err)
	}
	res := connect.NewResponse(&pb.ChatResponse{})
	raw, a, routing, err := is.unary(ctx, "Chat", nil, "/v1/chat/completions", normalize.ModeChat, body, req.Msg.GetInput().GetGroup(), req.Header(), res.Header())
	if err != nil {
		return nil, err
	}
	res.Msg.Content, res.Msg.FinishReason, res.Msg.Usage = a.text, a.finishReason, usageProto(a.usage)
	res.Msg.BodyJson, res.Msg.Routing = string(raw), routing
	return res, nil
}

func (is inferenceService) Complete(ctx context.Context, req *connect.Request[pb.CompleteRequest]) (*connect.Response[pb.CompleteResponse], error) {
	body, err := completionBody(req.Msg.GetInput(), false)
	if err != nil {
		return nil, connectError(err)
	}
	res := connect.NewResponse(&pb.CompleteResponse{})
	raw, a, routing, err := is.unary(ctx, "Complete", nil, "/v1/completions", normalize.ModeCompletion, body, req.Msg.GetInput().GetGroup(), req.Header(), res.Header())
	if err != nil {
		return nil, err
	}
	res.Msg.Text, res.Msg.FinishReason, res.Msg.Usage = a.text, a.finishReason, usageProto(a.usage)
	res.Msg.BodyJson, res.Msg.Routing = string(raw), routing
	return res, nil
}

// Invoke sends a raw JSON body to one of the JSON paths of the route
// table, normalized in the path's mode and routed as the REST path routes
// it, and returns the backend's raw answer.
func (is inferenceService) Invoke(ctx context.Context, req *connect.Request[pb.InvokeRequest]) (*connect.Response[pb.InvokeResponse], error) {
	rt, err := invokeRoute(req.Msg.GetPath(), req.Msg.GetBody())
	if err != nil {
		is.s.record("Invoke", nil, pipeline.Status(err))
		return nil, connectError(err)
	}
	res := connect.NewResponse(&pb.InvokeResponse{})
	var raw []byte
	var routing *pb.Routing
	if rt.Routing == routes.LeastLoaded {
		raw, routing, err = is.invokeLeastLoaded(ctx, rt, req.Msg.GetBody(), req.Msg.GetGroup(), req.Header(), res.Header())
	} else {
		raw, _, routing, err = is.unary(ctx, "Invoke", rt, rt.Path, rt.Mode, req.Msg.GetBody(), req.Msg.GetGroup(), req.Header(), res.Header())
	}
	if err != nil {
		return nil, err
	}
	res.Msg.Body = raw
	res.Msg.Routing = routing
	return res, nil
}

// invokable reports whether Invoke takes rt's path: a JSON body that goes
// to a backend (Explain has an RPC of its own).
func invokable(rt *routes.Route) bool {
	return rt != nil && rt.Body == routes.JSONBody && rt.Routing != routes.Local
}

// invokePaths lists the paths Invoke takes, for its error.
func invokePaths() string {
	var b strings.Builder
	for _, rt := range routes.All() {
		if invokable(&rt) {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(rt.Path)
		}
	}
	return b.String()
}

// invokeRoute is the route of an Invoke request's path (/invocations when
// empty), or the invalid_argument naming the path and the ones allowed. A
// streamed answer is refused but on /invocations, whose clients have
// always had its raw bytes.
func invokeRoute(path string, body []byte) (*routes.Route, error) {
	if path == "" {
		path = "/invocations"
	}
	rt := routes.Lookup(path)
	if !invokable(rt) {
		return nil, invalidField("path", fmt.Sprintf("%.200q is not a JSON path Invoke takes; use one of %s", path, invokePaths()))
	}
	if rt.Mode != normalize.ModeNative && gjson.GetBytes(body, "stream").Type == gjson.True {
		return nil, invalidField("stream", "is true: Invoke returns one answer; stream on the REST path "+rt.Path+" (or with ChatStream, CompleteStream)")
	}
	return rt, nil
}

// invokeLeastLoaded serves Invoke on a route that needs no particular
// replica (tokenize, detokenize): the body is put in canonical form and
// goes to the least-loaded healthy replica serving its model, as on the
// REST path.
func (is inferenceService) invokeLeastLoaded(ctx context.Context, rt *routes.Route, body []byte, group string, hdr, out http.Header) ([]byte, *pb.Routing, error) {
	s := is.s
	ctx, cancel := h1front.WithRequestTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	h1front.BodyRead(ctx) // the message is decoded
	p, err := s.pipe.Normalize(ctx, nil, body, rt.Mode, group, 0)
	var d route.Decision
	if err == nil {
		model := gjson.GetBytes(p.Body, "model").Str
		var name string
		if name, err = s.leastLoaded(model, rt.Path); err == nil {
			d, err = s.rt().PickMember(name, route.Request{Model: model}, false)
		}
		if err != nil {
			err = s.pipe.PickError(err, model)
		}
	}
	if err != nil {
		s.record("Invoke", nil, pipeline.Status(err))
		return nil, nil, connectError(err)
	}
	resp, err := s.pool.Forward(ctx, d.Member.(*backends.Backend), http.MethodPost, rt.Path, p.Body, forwardHeaders(hdr))
	if err != nil {
		d.DoneWith(failedOutcome(err))
		s.record("Invoke", &exchange{d: &d}, pipeline.Status(upstreamError(err)))
		return nil, nil, connectError(upstreamError(err))
	}
	defer resp.Body.Close()
	s.record("Invoke", &exchange{d: &d}, resp.StatusCode)
	raw, err := readAll(resp.Body)
	d.DoneWith(route.Outcome{Err: err, FirstByte: true, Status: resp.StatusCode})
	out[BackendHeader], out[DecisionHeader] = []string{d.Backend}, []string{d.Reason.String()}
	switch {
	case err != nil:
		return nil, nil, connectError(upstreamError(err))
	case resp.StatusCode/100 != 2:
		return nil, nil, connectError(backendStatusError(resp.StatusCode, raw))
	}
	return raw, routingOf(d.Backend, d.Reason, d.Distance, p.Info), nil
}

// stream runs one streaming request and calls send for each event, with
// what the event says (read once, for the router too: its usage and, for
// chat, its text, which the prefix index learns when the stream ends with
// [DONE]); the routing info rides on the first.
func (is inferenceService) stream(ctx context.Context, routeName, path string, mode normalize.Mode, body []byte, group string, hdr, out http.Header, send func(chunk []byte, a answer, routing *pb.Routing) error) error {
	s := is.s
	ctx, cancel := h1front.WithRequestTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	h1front.BodyRead(ctx) // the message is decoded
	x, err := s.open(ctx, path, mode, body, group, hdr, out)
	if err != nil {
		s.record(routeName, nil, pipeline.Status(err))
		return connectError(err)
	}
	defer x.close()
	s.record(routeName, x, x.resp.StatusCode)
	resp, d := x.resp, x.d
	if resp.StatusCode/100 != 2 {
		raw, _ := readAll(resp.Body)
		return connectError(backendStatusError(resp.StatusCode, raw))
	}
	routing := routingOf(d.Backend, d.Reason, d.Distance, x.info)
	as := x.readStream()
	defer as.put()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			as.finish()
			return nil
		}
		if !gjson.ValidBytes(data) {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("backend %s sent an event that is not JSON: %.200q", d.Backend, data))
		}
		if err := send(data, as.event(data), routing); err != nil {
			return err
		}
		routing = nil
	}
	if err := sc.Err(); err != nil {
		x.err = err
		return connectError(upstreamError(err))
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("backend %s ended the stream without [DONE]", d.Backend))
}

func (is inferenceService) ChatStream(ctx context.Context, req *connect.Request[pb.ChatStreamRequest], st *connect.ServerStream[pb.ChatStreamResponse]) error {
	body, err := chatBody(req.Msg.GetInput(), true)
	if err != nil {
		return connectError(err)
	}
	return is.stream(ctx, "ChatStream", "/v1/chat/completions", normalize.ModeChat, body, req.Msg.GetInput().GetGroup(), req.Header(), st.ResponseHeader(),
		func(ev []byte, a answer, routing *pb.Routing) error {
			return st.Send(&pb.ChatStreamResponse{Delta: a.text, FinishReason: a.finishReason, Usage: usageProto(a.usage), ChunkJson: string(ev), Routing: routing})
		})
}

func (is inferenceService) CompleteStream(ctx context.Context, req *connect.Request[pb.CompleteStreamRequest], st *connect.ServerStream[pb.CompleteStreamResponse]) error {
	body, err := completionBody(req.Msg.GetInput(), true)
	if err != nil {
		return connectError(err)
	}
	return is.stream(ctx, "CompleteStream", "/v1/completions", normalize.ModeCompletion, body, req.Msg.GetInput().GetGroup(), req.Header(), st.ResponseHeader(),
		func(ev []byte, a answer, routing *pb.Routing) error {
			return st.Send(&pb.CompleteStreamResponse{Delta: a.text, FinishReason: a.finishReason, Usage: usageProto(a.usage), ChunkJson: string(ev), Routing: routing})
		})
}
