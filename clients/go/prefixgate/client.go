package prefixgate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"connectrpc.com/connect"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/gen/prefixgate/v1/prefixgatev1connect"
	"github.com/prefixgate/prefixgate/normalize"
)

// Client calls a prefixgate router. It has a method for every RPC of the
// three services (Chat, ChatStream, Complete, CompleteStream, Invoke;
// NormalizeBody, Lint; ListBackends, Explain); the generated clients are
// fields, for headers and per-call options. The inference calls and Explain
// take CallOptions: WithFairnessID and WithObjective name the call's flow.
// Errors from the router are *connect.Error values, returned unchanged:
// branch with connect.CodeOf(err) or Code(err) (InvalidArgument for a
// rejected body, ResourceExhausted when every backend is at its bound or
// the request was shed, Unavailable when none serves the model); RetryAfter
// and IsRetryable read them. A refused call option is an *OptionError,
// returned before anything is sent.
type Client struct {
	Inference prefixgatev1connect.InferenceServiceClient
	Normalize prefixgatev1connect.NormalizeServiceClient
	Admin     prefixgatev1connect.AdminServiceClient
}

// NewClient returns a client for the router at baseURL ("http://host:port").
// A nil httpClient means http.DefaultClient. Pass connect.WithGRPC() or
// connect.WithGRPCWeb() to change the protocol (Connect by default).
func NewClient(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{
		Inference: prefixgatev1connect.NewInferenceServiceClient(httpClient, baseURL, opts...),
		Normalize: prefixgatev1connect.NewNormalizeServiceClient(httpClient, baseURL, opts...),
		Admin:     prefixgatev1connect.NewAdminServiceClient(httpClient, baseURL, opts...),
	}
}

// Chat sends the prompt the spec describes and waits for the answer.
func (c *Client) Chat(ctx context.Context, spec PromptSpec, opts ...CallOption) (*pb.ChatResponse, error) {
	in, err := spec.ChatInput()
	if err != nil {
		return nil, err
	}
	req, err := newRequest(&pb.ChatRequest{Input: in}, opts)
	if err != nil {
		return nil, err
	}
	res, err := c.Inference.Chat(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// ChatStream sends the prompt the spec describes and streams the answer.
// The caller must Close the stream.
func (c *Client) ChatStream(ctx context.Context, spec PromptSpec, opts ...CallOption) (*connect.ServerStreamForClient[pb.ChatStreamResponse], error) {
	in, err := spec.ChatInput()
	if err != nil {
		return nil, err
	}
	req, err := newRequest(&pb.ChatStreamRequest{Input: in}, opts)
	if err != nil {
		return nil, err
	}
	return c.Inference.ChatStream(ctx, req)
}

// Complete sends the completion the spec describes and waits for the
// answer. Routing.Key equals BuildCompletionKey's key.
func (c *Client) Complete(ctx context.Context, spec CompletionSpec, opts ...CallOption) (*pb.CompleteResponse, error) {
	in, err := spec.CompletionInput()
	if err != nil {
		return nil, err
	}
	req, err := newRequest(&pb.CompleteRequest{Input: in}, opts)
	if err != nil {
		return nil, err
	}
	res, err := c.Inference.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// CompleteStream sends the completion the spec describes and streams the
// answer; the first message carries the routing. The caller must Close the
// stream.
func (c *Client) CompleteStream(ctx context.Context, spec CompletionSpec, opts ...CallOption) (*connect.ServerStreamForClient[pb.CompleteStreamResponse], error) {
	in, err := spec.CompletionInput()
	if err != nil {
		return nil, err
	}
	req, err := newRequest(&pb.CompleteStreamRequest{Input: in}, opts)
	if err != nil {
		return nil, err
	}
	return c.Inference.CompleteStream(ctx, req)
}

// Invoke sends a raw JSON body on the native path (/invocations), routed on
// the first bytes of its canonical form, and returns the backend's raw JSON
// answer. group may be empty.
func (c *Client) Invoke(ctx context.Context, body []byte, group string, opts ...CallOption) (*pb.InvokeResponse, error) {
	return c.InvokePath(ctx, "", body, group, opts...)
}

// InvokePath sends a raw JSON body to one of the router's JSON paths
// (/v1/responses, /v1/messages, /v1/embeddings, /rerank, /tokenize, ...;
// /invocations when path is empty), normalized and routed as that REST
// path does, and returns the backend's raw JSON answer. group may be
// empty.
func (c *Client) InvokePath(ctx context.Context, path string, body []byte, group string, opts ...CallOption) (*pb.InvokeResponse, error) {
	req, err := newRequest(&pb.InvokeRequest{Path: path, Body: body, Group: group}, opts)
	if err != nil {
		return nil, err
	}
	res, err := c.Inference.Invoke(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// LintOptions tune a Lint call; the zero value is the server's defaults.
type LintOptions struct {
	// Mode reads every body in this mode; ModeAuto detects each.
	Mode Mode
	// PrefixLength is the routing window (1024..65536); 0 is the
	// router's.
	PrefixLength int
	// Replicas the traffic spreads over, for the hot-key rule; 0 skips it.
	Replicas int
	// Direct: the traffic reaches a byte-prefix router without
	// prefixgate's normalizer.
	Direct bool
}

// Lint reports what in a corpus of request bodies (one JSON body each, in
// order) would cost prefix cache hits: the findings and a summary, from the
// same engine as "prefixgate lint". A body that is not JSON is a finding
// (invalid-json), not an error; bad options are InvalidArgument.
func (c *Client) Lint(ctx context.Context, requests [][]byte, opts LintOptions) (*pb.LintResponse, error) {
	res, err := c.Normalize.Lint(ctx, connect.NewRequest(&pb.LintRequest{
		Requests: requests, Mode: ModeProto(opts.Mode), PrefixLength: int32(opts.PrefixLength),
		Replicas: int32(opts.Replicas), Direct: opts.Direct,
	}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// NormalizeBody asks the router for the canonical form and key of body.
// Canonicalize and Key compute the same locally.
func (c *Client) NormalizeBody(ctx context.Context, body []byte, opts KeyOptions) (*pb.NormalizeResponse, error) {
	res, err := c.Normalize.Normalize(ctx, connect.NewRequest(&pb.NormalizeRequest{
		Body: body, Mode: ModeProto(opts.Mode), Group: opts.Group, PrefixLength: int32(opts.PrefixLength),
	}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// ListBackends lists the router's backends.
func (c *Client) ListBackends(ctx context.Context) (*pb.ListBackendsResponse, error) {
	res, err := c.Admin.ListBackends(ctx, connect.NewRequest(&pb.ListBackendsRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// Explain asks where body would go and why, without sending it.
func (c *Client) Explain(ctx context.Context, body []byte, opts KeyOptions, callOpts ...CallOption) (*pb.ExplainResponse, error) {
	req, err := newRequest(&pb.ExplainRequest{
		Body: body, Mode: ModeProto(opts.Mode), Group: opts.Group, PrefixLength: int32(opts.PrefixLength),
	}, callOpts)
	if err != nil {
		return nil, err
	}
	res, err := c.Admin.Explain(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// ModeProto converts a Mode to the API's RequestMode.
func ModeProto(m Mode) pb.RequestMode {
	switch m {
	case ModeChat:
		return pb.RequestMode_REQUEST_MODE_CHAT
	case ModeCompletion:
		return pb.RequestMode_REQUEST_MODE_COMPLETION
	case ModeNative:
		return pb.RequestMode_REQUEST_MODE_NATIVE
	case ModeResponses:
		return pb.RequestMode_REQUEST_MODE_RESPONSES
	case ModeMessages:
		return pb.RequestMode_REQUEST_MODE_MESSAGES
	case ModePooling:
		return pb.RequestMode_REQUEST_MODE_POOLING
	}
	return pb.RequestMode_REQUEST_MODE_UNSPECIFIED
}

// ChatInput converts the spec to the API's ChatInput, so that the router
// renders exactly the request Build renders and computes the same key. Tool
// objects must have the shape ChatInput carries: {"type", "function":
// {"name", "description", "parameters"}}.
func (s PromptSpec) ChatInput() (*pb.ChatInput, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	in := &pb.ChatInput{Model: s.Model, Group: s.Group}
	for i, raw := range s.Tools {
		t, err := toolProto(raw)
		if err != nil {
			return nil, specErr(fmt.Sprintf("tools[%d]", i), "%v", err)
		}
		in.Tools = append(in.Tools, t)
	}
	for _, m := range s.Messages() {
		in.Messages = append(in.Messages, &pb.Message{Role: m.Role, Content: m.Content})
	}
	extra := map[string]json.RawMessage{}
	for k, v := range s.Parameters {
		extra[k] = v
	}
	if len(s.Metadata) > 0 {
		md, _ := json.Marshal(s.Metadata)
		extra["metadata"] = md
	}
	if s.Group != "" {
		g, _ := json.Marshal(s.Group)
		extra["prompt_cache_key"] = g
	}
	if len(extra) > 0 {
		b, err := json.Marshal(extra)
		if err != nil {
			return nil, specErr("parameters", "%v", err)
		}
		in.ExtraJson = string(b)
	}
	return in, nil
}

func toolProto(raw json.RawMessage) (*pb.Tool, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	if k, ok := firstOtherMember(raw, "type", "function"); ok {
		return nil, fmt.Errorf("member %s cannot be sent through ChatInput", normalize.QuoteName(k))
	}
	var t pb.Tool
	if v, ok := top["type"]; ok {
		if err := json.Unmarshal(v, &t.Type); err != nil || t.Type == "" {
			return nil, fmt.Errorf("type must be a non-empty string")
		}
	} else {
		return nil, fmt.Errorf("type is required")
	}
	var fn map[string]json.RawMessage
	if err := json.Unmarshal(top["function"], &fn); err != nil || fn == nil {
		return nil, fmt.Errorf("function must be an object")
	}
	if k, ok := firstOtherMember(top["function"], "name", "description", "parameters"); ok {
		return nil, fmt.Errorf("function member %s cannot be sent through ChatInput", normalize.QuoteName(k))
	}
	if err := json.Unmarshal(fn["name"], &t.Name); err != nil {
		return nil, fmt.Errorf("function.name must be a string")
	}
	if v, ok := fn["description"]; ok {
		if err := json.Unmarshal(v, &t.Description); err != nil || t.Description == "" {
			return nil, fmt.Errorf("function.description must be a non-empty string")
		}
	}
	if v, ok := fn["parameters"]; ok {
		t.ParametersJson = string(v)
	}
	return &t, nil
}

// firstOtherMember returns the first member name of the JSON object obj, in
// document order, that is not one of allowed, so the error names the same
// member on every run and in every SDK. obj is already known to be an
// object.
func firstOtherMember(obj json.RawMessage, allowed ...string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // the opening brace
		return "", false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		name, _ := tok.(string)
		if !slices.Contains(allowed, name) {
			return name, true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}
