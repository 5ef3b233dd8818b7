// Package epp is prefixgate as an endpoint picker: the Gateway API
// Inference Extension protocol over Envoy's external processing (ext_proc)
// gRPC API. The gateway streams each request's headers and body to the
// picker; the picker runs the request pipeline serve runs (package
// pipeline: tenant, decode, normalize, key), picks a backend, and answers
// with the chosen endpoint in the x-gateway-destination-endpoint header and
// in the envoy.lb dynamic metadata, and the canonical body. The gateway
// then moves the bytes; the picker follows the response to release the
// pick and learn from the backend's usage.
package epp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/internal/sticky"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// The protocol's names (GIE docs/proposals/004-endpoint-picker-protocol).
const (
	// DestinationHeader carries the picked endpoint ip:port to the gateway.
	DestinationHeader = "x-gateway-destination-endpoint"
	// MetadataNamespace holds the picked and the served endpoint.
	MetadataNamespace = "envoy.lb"
	// ServedKey is the endpoint that actually served, in MetadataNamespace
	// of a response-phase message.
	ServedKey = "x-gateway-destination-endpoint-served"
	// SubsetNamespace and SubsetKey carry the endpoints the gateway allows.
	SubsetNamespace = "envoy.lb.subset_hint"
	SubsetKey       = "x-gateway-destination-endpoint-subset"
)

// ChunkSize is the largest body piece sent back in one streamed body
// response; Envoy recommends at most 64 KiB per message.
const ChunkSize = 62 << 10

// usageTail is how much of a response body's end is kept to read its usage:
// an OpenAI answer reports usage in its last JSON object or SSE event.
const usageTail = 64 << 10

// Fleet is what the picker runs on: the request pipeline with its router,
// the backends' background work (probes, load hints) and their metrics.
// The HTTP server (internal/server) is one, so that serve and epp share
// their wiring.
type Fleet interface {
	// Pipeline prepares each request and maps errors to statuses.
	Pipeline() *pipeline.Pipeline
	// RequestTimeout bounds a decision, queue wait included.
	RequestTimeout() time.Duration
	// RunBackground probes the backends once, then keeps probing them in
	// the background until ctx ends.
	RunBackground(ctx context.Context)
	// Gatherer holds the pool's, router's and pipeline's series.
	Gatherer() prometheus.Gatherer
	// StoredResponses is which endpoint stored each Responses id
	// (sticky.TenantKey scopes ids to tenants): bounded, and shared with
	// serve's front door when the fleet is the HTTP server.
	StoredResponses() *sticky.Table
	// Sessions is which endpoint each session's latest request went to,
	// and the request header that names the session (sessions.go): shared
	// with serve's front door when the fleet is the HTTP server. A nil
	// table turns sessions off.
	Sessions() (*sticky.Table, string)
}

// Picker serves envoy.service.ext_proc.v3.ExternalProcessor.
type Picker struct {
	extprocv3.UnimplementedExternalProcessorServer
	fleet   Fleet
	pipe    *pipeline.Pipeline
	log     *slog.Logger
	metrics *metrics
	seed    maphash.Seed
}

// New returns a picker over fleet's pipeline, router and backends. Serve
// starts fleet's background work.
func New(fleet Fleet, log *slog.Logger) *Picker {
	if log == nil {
		log = slog.Default()
	}
	return &Picker{fleet: fleet, pipe: fleet.Pipeline(), log: log, metrics: newMetrics(), seed: maphash.MakeSeed()}
}

// Register adds the ext_proc service to g.
func (p *Picker) Register(g *grpc.Server) { extprocv3.RegisterExternalProcessorServer(g, p) }

// exchange is one HTTP request's stream: the gateway opens one Process
// stream per request.
type exchange struct {
	p      *Picker
	stream extprocv3.ExternalProcessor_ProcessServer

	requestMode  filterv3.ProcessingMode_BodySendMode
	responseMode filterv3.ProcessingMode_BodySendMode
	path         string
	headers      map[string]string // lower-case names, first value
	subset       []string          // nil: no hint; empty non-nil: a hint that allows nothing
	hinted       bool
	body         []byte
	started      time.Time

	d        route.Decision
	picked   bool
	req      route.Request
	key      string
	status   int
	sse      bool
	tail     []byte
	respSize int
	// textEvents counts the streamed answer's events that carry text:
	// its output tokens when no usage states them (flowcontrol.go).
	textEvents int

	// The stored response the request names (responses.go): its id, the
	// member that named it ("" for the path) and the endpoint that holds
	// it; pin "" for none.
	pin, pinID, pinParam string
	// learnID: the answer is a stored response whose id is learned from
	// head, the answer's beginning, for tenant.
	learnID, learned bool
	tenant           string
	head             []byte
	// session is the request's session (sticky.TenantKey), "" for none.
	session string
	// prefill is a split request's prefill worker (disagg.go).
	prefill       route.Decision
	prefillPicked bool
	// flow is the request's flow when flowOn: flow control admits it
	// (flowcontrol.go).
	flow   flowgate.Identity
	flowOn bool
}

// Process runs one request's exchange until the gateway closes the stream.
func (p *Picker) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	x := &exchange{p: p, stream: stream, requestMode: filterv3.ProcessingMode_BUFFERED,
		responseMode: filterv3.ProcessingMode_NONE, started: time.Now()}
	defer x.finish()
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		if err := x.handle(msg); err != nil {
			if errors.Is(err, errStreamDone) {
				return nil
			}
			return err
		}
	}
}

// errStreamDone ends an exchange that answered with an immediate response.
var errStreamDone = errors.New("epp: exchange answered")

func (x *exchange) handle(msg *extprocv3.ProcessingRequest) error {
	if pc := msg.GetProtocolConfig(); pc != nil {
		x.requestMode, x.responseMode = pc.GetRequestBodyMode(), pc.GetResponseBodyMode()
	}
	if md := msg.GetMetadataContext(); md != nil {
		x.readMetadata(md.GetFilterMetadata())
	}
	switch r := msg.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return x.requestHeaders(r.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return x.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return x.requestTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return x.responseHeaders(r.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return x.responseBody(r.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		x.finish()
		return x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}})
	}
	return nil
}

// readMetadata takes the subset hint (request phase) and the served
// endpoint (response phase) from the forwarded metadata.
func (x *exchange) readMetadata(md map[string]*structpb.Struct) {
	if hint, ok := md[SubsetNamespace]; ok && !x.hinted {
		if v, ok := hint.GetFields()[SubsetKey]; ok {
			x.hinted = true
			x.subset = []string{}
			switch v.Kind.(type) {
			case *structpb.Value_ListValue:
				for _, e := range v.GetListValue().GetValues() {
					x.subset = append(x.subset, splitEndpoints(e.GetStringValue())...)
				}
			case *structpb.Value_StringValue:
				x.subset = splitEndpoints(v.GetStringValue())
			}
		}
	}
	if lb, ok := md[MetadataNamespace]; ok && x.picked {
		if v, ok := lb.GetFields()[ServedKey]; ok {
			x.correctServed(strings.TrimSpace(v.GetStringValue()))
		}
	}
}

func splitEndpoints(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// correctServed moves the in-flight slot to the endpoint that served, when
// the gateway used another one than the picker's first choice.
func (x *exchange) correctServed(served string) {
	if served == "" || served == x.d.Backend || x.d.Released() {
		return
	}
	d, err := x.p.pipe.Router().PickMember(served, x.req, false)
	x.p.metrics.servedCorrections.Inc()
	if err != nil {
		// The served endpoint is not (or no longer) a member: the request
		// still occupies no slot of ours, so release the stale one.
		x.p.log.Warn("served endpoint is not a healthy member", "picked", x.d.Backend, "served", served, "err", err)
		x.d.Done()
		return
	}
	x.p.log.Info("gateway served elsewhere", "picked", x.d.Backend, "served", served)
	x.d.Done()
	x.d = d
}

func (x *exchange) requestHeaders(h *extprocv3.HttpHeaders) error {
	x.headers = make(map[string]string, len(h.GetHeaders().GetHeaders()))
	for _, hv := range h.GetHeaders().GetHeaders() {
		k := strings.ToLower(hv.GetKey())
		if _, dup := x.headers[k]; dup {
			continue
		}
		v := hv.GetValue()
		if len(hv.GetRawValue()) > 0 {
			v = string(hv.GetRawValue())
		}
		x.headers[k] = v
	}
	x.path, _, _ = strings.Cut(x.headers[":path"], "?")
	switch x.requestMode {
	case filterv3.ProcessingMode_STREAMED, filterv3.ProcessingMode_BUFFERED_PARTIAL, filterv3.ProcessingMode_GRPC:
		// The decision needs the whole body before the headers leave; in
		// these modes they leave first, or the body comes in part.
		return x.refuse(pipeline.NewError(http.StatusInternalServerError, "unsupported_body_mode",
			"the gateway's ext_proc request_body_mode is "+x.requestMode.String()+"; prefixgate epp needs BUFFERED or FULL_DUPLEX_STREAMED (docs/epp.md)"))
	}
	if h.GetEndOfStream() || x.requestMode == filterv3.ProcessingMode_NONE {
		// No body will come: decide now.
		return x.decide(true, false)
	}
	if x.requestMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		// The answer to the headers waits for the body: the decision needs
		// it, and the destination header goes with the headers.
		return nil
	}
	// Buffered: the gateway waits for this answer before sending the body;
	// the decision goes with the body response.
	return x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}})
}

func (x *exchange) requestBody(b *extprocv3.HttpBody) error {
	if err := x.p.pipe.CheckSize(int64(len(x.body)) + int64(len(b.GetBody()))); err != nil {
		return x.refuse(err)
	}
	x.body = append(x.body, b.GetBody()...)
	if x.requestMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED && !b.GetEndOfStream() {
		return nil // more chunks, or trailers, follow
	}
	// Buffered: this one message is the whole body, even when trailers
	// follow (end_of_stream false).
	return x.decide(false, b.GetEndOfStream())
}

// requestTrailers end a full-duplex body that did not end with
// end_of_stream.
func (x *exchange) requestTrailers() error {
	if !x.picked {
		if err := x.decide(false, false); err != nil {
			return err
		}
	}
	return x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}})
}

// mode maps the request path to the normalizer's mode, as the route table
// gives it; ok is false for a path whose body is not keyed (it is routed
// without a prefix key).
func mode(path string) (normalize.Mode, bool) {
	if rt := routes.Lookup(path); rt != nil && rt.Keyed() {
		return rt.Mode, true
	}
	return 0, false
}

// decide runs the pipeline and answers: in the headers response when no
// body came (headersOnly), else with the canonical body. endOfStream says
// whether the body ended the request (no trailers follow).
func (x *exchange) decide(headersOnly, endOfStream bool) error {
	ctx, cancel := context.WithTimeout(x.stream.Context(), x.p.fleet.RequestTimeout())
	defer cancel()
	body, keyed, err := x.prepare(ctx, headersOnly)
	if err != nil {
		return x.refuse(err)
	}
	start := time.Now()
	var d route.Decision
	if s, ok := x.splitter(); ok && keyed {
		d, err = x.pickSplit(ctx, s)
	} else {
		d, err = x.pick(ctx)
	}
	x.p.pipe.ObservePick(time.Since(start), &d)
	x.p.pipe.CountSpill(&d)
	if err != nil {
		return x.refuse(err)
	}
	x.d, x.picked = d, true

	set := []*corev3.HeaderValueOption{
		header(DestinationHeader, d.Backend),
		header(pipeline.BackendHeader, d.Backend),
		header(pipeline.DecisionHeader, d.Reason.String()),
	}
	if x.prefillPicked {
		set = append(set, header(PrefillerHeader, x.prefill.Backend))
	}
	var remove []string
	if keyed {
		set = append(set, header(pipeline.KeyHeader, x.key))
	} else {
		// No key was computed: a client's own must not reach the backend.
		remove = append(remove, strings.ToLower(pipeline.KeyHeader))
	}
	if !headersOnly && keyed {
		// The backend gets the canonical body, decoded, as from serve.
		set = append(set, header("content-length", strconv.Itoa(len(body))))
		if _, ok := x.headers["content-encoding"]; ok {
			remove = append(remove, "content-encoding")
		}
	}
	if x.p.pipe.TenantsEnabled() {
		// The API key identifies the caller to prefixgate, not the backend.
		remove = append(remove, "authorization")
	}
	common := &extprocv3.CommonResponse{
		HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: remove},
		ClearRouteCache: true,
	}
	meta := &structpb.Struct{Fields: map[string]*structpb.Value{
		MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			DestinationHeader: structpb.NewStringValue(d.Backend),
		}}),
	}}
	x.p.metrics.picks.WithLabelValues(d.Reason.String()).Inc()
	x.p.log.Info("picked", "path", x.path, "endpoint", d.Backend, "decision", d.Reason.String(), "key", x.key,
		"home", d.Home, "load", d.Load, "queued", d.Queued, "subset", len(x.subset), "mode", x.requestMode.String())

	switch {
	case headersOnly:
		return x.send(&extprocv3.ProcessingResponse{DynamicMetadata: meta,
			Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: common}}})
	case x.requestMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		if err := x.send(&extprocv3.ProcessingResponse{DynamicMetadata: meta,
			Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: common}}}); err != nil {
			return err
		}
		return x.sendBody(body, endOfStream)
	default:
		// Buffered: the headers are still held by the gateway, so the
		// header mutation rides on the body response.
		common.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}}
		return x.send(&extprocv3.ProcessingResponse{DynamicMetadata: meta,
			Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: common}}})
	}
}

// prepare runs the pipeline over the request: an inference body is
// authenticated, decoded, canonicalized and keyed (keyed is true, body is
// the canonical body); anything else (GET /v1/models, health) is spread by
// path behind the same tenant check.
func (x *exchange) prepare(ctx context.Context, headersOnly bool) (body []byte, keyed bool, err error) {
	m, inference := mode(x.path)
	if rt := routes.Lookup(x.path); rt != nil && rt.Routing == routes.ByStoredID {
		if err := x.pinStored(rt, nil); err != nil {
			return nil, false, err
		}
	}
	if !inference || headersOnly {
		if _, err := x.p.pipe.Authenticate(x.headers["authorization"]); err != nil {
			return nil, false, err
		}
		x.req = route.Request{Key: maphash.String(x.p.seed, x.path)}
		return x.body, false, nil
	}
	prep, err := x.p.pipe.Prepare(ctx, pipeline.Request{Body: x.body, Encoding: x.headers["content-encoding"], Mode: m,
		Group: x.headers[strings.ToLower(pipeline.GroupHeader)], Authorization: x.headers["authorization"]})
	if err != nil {
		return nil, false, err
	}
	x.req, x.key = prep.RouteRequest(), prep.Info.KeyHex()
	if err := x.identify(prep.Info.Group); err != nil {
		return nil, false, err
	}
	if err := x.pinStored(routes.Lookup(x.path), prep.Body); err != nil {
		return nil, false, err
	}
	if err := x.readSession(); err != nil {
		return nil, false, err
	}
	return prep.Body, true, nil
}

// pick places the request: on the endpoint of the stored response it
// names, else its session's, else where the policy picks.
func (x *exchange) pick(ctx context.Context) (route.Decision, error) {
	if x.pin != "" {
		return x.pickStored()
	}
	if x.session != "" {
		d, ok := x.pickSession()
		if !ok {
			var err error
			if d, err = x.pickByPolicy(ctx); err != nil {
				return d, err
			}
		}
		x.followSession(d)
		return d, nil
	}
	return x.pickByPolicy(ctx)
}

// pickByPolicy asks the router, restricted to the gateway's subset when it
// sent one.
func (x *exchange) pickByPolicy(ctx context.Context) (route.Decision, error) {
	rt := x.p.pipe.Router()
	if !x.hinted && x.flowOn {
		return x.acquire(ctx)
	}
	if !x.hinted {
		d, err := rt.Pick(ctx, x.req)
		if err != nil {
			return d, x.p.pipe.PickError(err, x.req.Model)
		}
		return d, nil
	}
	if len(x.subset) == 0 {
		return route.Decision{}, pipeline.NewError(http.StatusServiceUnavailable, "no_backend",
			"the gateway's endpoint subset hint is empty")
	}
	// The policy's own choice stands when the subset allows it, so a
	// subset that covers the pool routes exactly as without one. A policy
	// that learns placements gets a dry run first: its pick records the
	// prompt on the member it chose, which must not happen for a
	// member the request never reaches. (A pick racing another may still
	// choose outside the subset; that one is released, its record left.)
	// The other policies record nothing, and a dry run would draw random's
	// choice twice.
	allowed := true
	if rt.LearnsPlacements() {
		dry := rt.Explain(x.req)
		allowed = dry.Err == nil && slices.Contains(x.subset, dry.Backend)
	}
	if allowed {
		if d, err := rt.TryPick(x.req); err == nil {
			if slices.Contains(x.subset, d.Backend) {
				return d, nil
			}
			d.Done()
		}
	}
	// Else the subset's members in an order fixed by the key (rendezvous
	// hashing), so requests sharing a prefix agree on their member.
	order := slices.Clone(x.subset)
	slices.SortFunc(order, func(a, b string) int {
		ha, hb := rendezvous(x.req.Key, a), rendezvous(x.req.Key, b)
		switch {
		case ha > hb:
			return -1
		case ha < hb:
			return 1
		}
		return strings.Compare(a, b)
	})
	order = slices.Compact(order)
	var saturated error
	for _, name := range order {
		d, err := rt.PickMember(name, x.req, true)
		if err == nil {
			return d, nil
		}
		if errors.Is(err, route.ErrSaturated) {
			saturated = err
		}
	}
	if saturated != nil {
		return route.Decision{}, x.p.pipe.PickError(saturated, x.req.Model)
	}
	return route.Decision{}, pipeline.NewError(http.StatusServiceUnavailable, "no_backend",
		fmt.Sprintf("none of the %d endpoints in the gateway's subset hint is a healthy backend serving this request", len(order)))
}

// rendezvous scores member name for key (highest random weight).
func rendezvous(key uint64, name string) uint64 {
	h := key ^ 0x9e3779b97f4a7c15
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 0x100000001b3
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// sendBody streams body back in chunks; the last carries endOfStream.
func (x *exchange) sendBody(body []byte, endOfStream bool) error {
	for {
		n := min(len(body), ChunkSize)
		last := n == len(body)
		if err := x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
				StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body[:n], EndOfStream: last && endOfStream},
			}}},
		}}}); err != nil {
			return err
		}
		body = body[n:]
		if last {
			return nil
		}
	}
}

// refuse answers with an immediate response in the error shape of the
// request's route (OpenAI's, Anthropic's on /v1/messages).
func (x *exchange) refuse(err error) error {
	e := pipeline.AsError(err)
	code, errCode, msg := e.Status, e.Code, e.Message
	body := errorBody(e)
	if routes.ErrorShapeFor(x.path) == routes.AnthropicErrors {
		body = anthropicErrorBody(code, msg)
	}
	set := []*corev3.HeaderValueOption{header("content-type", "application/json")}
	if s := e.RetryAfterSeconds(); s > 0 {
		set = append(set, header("retry-after", strconv.Itoa(s)))
	}
	x.p.metrics.refusals.WithLabelValues(strconv.Itoa(code)).Inc()
	x.p.log.Info("refused", "path", x.path, "status", code, "code", errCode, "err", msg)
	if err := x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode(code)},
		Headers: &extprocv3.HeaderMutation{SetHeaders: set},
		Body:    body,
		Details: "prefixgate_" + errCode,
	}}}); err != nil {
		return err
	}
	return errStreamDone
}

// errorBody is e in OpenAI's error shape, as serve writes it: JSON
// encoding, not Go quoting, whose \x escapes JSON does not have.
func errorBody(e *pipeline.Error) []byte {
	type body struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"` // null unless a field is at fault
		Code    string  `json:"code"`
	}
	b := body{Message: e.Message, Type: e.Type(), Code: e.Code}
	if e.Param != "" {
		b.Param = &e.Param
	}
	out, _ := json.Marshal(map[string]body{"error": b}) // strings only: cannot fail
	return out
}

// anthropicErrorBody is an error in Anthropic's shape, JSON-encoded (Go
// quoting's \x escapes are not JSON).
func anthropicErrorBody(status int, msg string) []byte {
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{routes.AnthropicErrorType(status), msg}})
	return b
}

func (x *exchange) responseHeaders(h *extprocv3.HttpHeaders) error {
	for _, hv := range h.GetHeaders().GetHeaders() {
		v := hv.GetValue()
		if len(hv.GetRawValue()) > 0 {
			v = string(hv.GetRawValue())
		}
		switch strings.ToLower(hv.GetKey()) {
		case ":status":
			x.status, _ = strconv.Atoi(v)
			x.releasePrefill(x.status)
		case "content-type":
			x.sse = strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "text/event-stream")
		}
	}
	if err := x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}); err != nil {
		return err
	}
	if h.GetEndOfStream() {
		x.finish()
	}
	return nil
}

func (x *exchange) responseBody(b *extprocv3.HttpBody) error {
	chunk := b.GetBody()
	x.respSize += len(chunk)
	if x.sse {
		x.textEvents += textEvents(chunk)
	}
	x.tail = append(x.tail, chunk...)
	if len(x.tail) > 2*usageTail {
		x.tail = append(x.tail[:0], x.tail[len(x.tail)-usageTail:]...)
	}
	// Learned before the piece goes back: the client cannot name the id
	// before the picker knows it.
	x.learn(chunk, b.GetEndOfStream())
	var resp *extprocv3.BodyResponse
	if x.responseMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		// Full duplex: every chunk must be sent back, as it came, at once.
		resp = &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
			Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: chunk, EndOfStream: b.GetEndOfStream()}},
		}}}
	} else {
		resp = &extprocv3.BodyResponse{}
	}
	if b.GetEndOfStream() {
		x.finish()
	}
	return x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: resp}})
}

// finish releases the pick once, with what the response said.
func (x *exchange) finish() {
	x.releasePrefill(x.status)
	if !x.picked || x.d.Released() {
		return
	}
	o := route.Outcome{FirstByte: x.status != 0, Status: x.status, PromptTokens: -1, CachedTokens: -1}
	if x.status >= 500 {
		o.Err = fmt.Errorf("backend %s answered %d", x.d.Backend, x.status)
	}
	if x.status == 0 {
		o.Err = errors.New("the gateway closed the stream before a response")
	}
	o.PromptTokens, o.CachedTokens = usage(x.tail, x.sse, x.respSize == len(x.tail))
	x.d.DoneWith(o)
	x.chargeFlow()
	if o.CachedTokens >= 0 {
		x.p.metrics.cachedTokens.Add(float64(o.CachedTokens))
	}
	if o.PromptTokens >= 0 {
		x.p.metrics.promptTokens.Add(float64(o.PromptTokens))
	}
	x.p.log.Debug("released", "endpoint", x.d.Backend, "status", x.status, "prompt_tokens", o.PromptTokens,
		"cached_tokens", o.CachedTokens, "took", time.Since(x.started))
}

// usage reads prompt and cached tokens from the end of a response body: the
// last SSE event that has a usage object, or the whole JSON body when it
// was kept whole. -1 when the body did not say.
func usage(tail []byte, sse, whole bool) (prompt, cached int) {
	prompt, cached = -1, -1
	read := func(u gjson.Result) {
		if p := u.Get("prompt_tokens"); p.Exists() {
			prompt = int(p.Int())
		}
		if c := u.Get("prompt_tokens_details.cached_tokens"); c.Exists() {
			cached = int(c.Int())
		}
	}
	if !sse {
		if whole && gjson.ValidBytes(tail) {
			if u := gjson.GetBytes(tail, "usage"); u.IsObject() {
				read(u)
			}
		}
		return prompt, cached
	}
	lines := bytes.Split(tail, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		data, ok := bytes.CutPrefix(bytes.TrimSpace(lines[i]), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if !gjson.ValidBytes(data) {
			continue
		}
		if u := gjson.GetBytes(data, "usage"); u.IsObject() {
			read(u)
			return prompt, cached
		}
	}
	return prompt, cached
}

func (x *exchange) send(r *extprocv3.ProcessingResponse) error {
	if err := x.stream.Send(r); err != nil {
		return fmt.Errorf("epp: sending to the gateway: %w", err)
	}
	return nil
}

func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}
