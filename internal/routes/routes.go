// Package routes is the table of REST paths prefixgate serves: for each,
// its methods, its body, how the body is normalized and keyed, how a
// replica is chosen, the shape of the errors the router writes on it and
// its metrics label. The HTTP server's mux, Explain, the metrics, the
// endpoint picker and the README's path table all read it, so a route is
// added in one place. It knows no HTTP: it is data and lookups.
package routes

import (
	"strings"

	"github.com/prefixgate/prefixgate/normalize"
)

// Routing says how a route chooses the replica a request goes to.
type Routing uint8

const (
	// ByPrefix routes on the canonical body's key and blocks through the
	// configured policy (the prefix index by default), as chat does.
	ByPrefix Routing = iota
	// ByPrefixOrStored is ByPrefix, except that a body naming
	// previous_response_id goes to the replica that stored that response.
	ByPrefixOrStored
	// ByStoredID goes to the replica that stored the response named in
	// the path.
	ByStoredID
	// LeastLoaded goes to the least-loaded healthy replica serving the
	// body's model (any healthy replica for a route without a body).
	LeastLoaded
	// FanOut merges what every healthy replica answers, as the pool's
	// probes last read it.
	FanOut
	// Local is answered by the router itself.
	Local
)

var routingNames = [...]string{"prefix index", "prefix index, or by stored response id", "by stored response id", "least-loaded replica serving the model", "every healthy replica's model list, merged", "the router itself"}

func (r Routing) String() string { return routingNames[r] }

// ErrorShape is the JSON shape of the errors the router writes on a route.
type ErrorShape uint8

const (
	// OpenAIErrors: {"error":{"message","type","param","code"}}.
	OpenAIErrors ErrorShape = iota
	// AnthropicErrors: {"type":"error","error":{"type","message"}}.
	AnthropicErrors
)

func (e ErrorShape) String() string {
	if e == AnthropicErrors {
		return "Anthropic"
	}
	return "OpenAI"
}

// BodyKind is what a route's request body is.
type BodyKind uint8

const (
	// NoBody: the route reads no body.
	NoBody BodyKind = iota
	// JSONBody: a JSON object, validated and put in canonical form before
	// anything is forwarded (limits.max_body_bytes).
	JSONBody
	// MultipartBody: multipart/form-data, streamed through
	// (limits.max_upload_bytes).
	MultipartBody
)

// Route is one path the router serves.
type Route struct {
	// Path is the ServeMux path pattern, without a method.
	Path string
	// Methods are the methods allowed, the first the one to use.
	Methods string
	// Label is the route label of prefixgate_requests_total.
	Label   string
	Body    BodyKind
	Mode    normalize.Mode // how a JSON body is normalized and keyed
	Routing Routing
	Errors  ErrorShape
	// Doc says what the route is, one line, as the README's path table
	// shows it.
	Doc string
}

// table is every REST path the router serves: the mux, Explain, the
// metrics' route label, the error shape and the README's path table all
// read it.
var table = []Route{
	{"/v1/chat/completions", "POST", "chat_completions", JSONBody, normalize.ModeChat, ByPrefix, OpenAIErrors, "OpenAI chat completions, plain and streamed"},
	{"/v1/completions", "POST", "completions", JSONBody, normalize.ModeCompletion, ByPrefix, OpenAIErrors, "OpenAI completions, plain and streamed"},
	{"/v1/responses", "POST", "responses", JSONBody, normalize.ModeResponses, ByPrefixOrStored, OpenAIErrors, "OpenAI Responses, plain and streamed; a follow-up naming previous_response_id goes to the replica that stored it"},
	{"/v1/responses/{id}", "GET", "responses_get", NoBody, normalize.ModeAuto, ByStoredID, OpenAIErrors, "a stored response, from the replica that stored it"},
	{"/v1/responses/{id}/cancel", "POST", "responses_cancel", NoBody, normalize.ModeAuto, ByStoredID, OpenAIErrors, "cancels a background response on the replica that stored it"},
	{"/v1/messages", "POST", "messages", JSONBody, normalize.ModeMessages, ByPrefix, AnthropicErrors, "Anthropic Messages, plain and streamed; errors in Anthropic's shape"},
	{"/v1/embeddings", "POST", "embeddings", JSONBody, normalize.ModePooling, ByPrefix, OpenAIErrors, "OpenAI embeddings"},
	{"/pooling", "POST", "pooling", JSONBody, normalize.ModePooling, ByPrefix, OpenAIErrors, "vLLM pooling"},
	{"/classify", "POST", "classify", JSONBody, normalize.ModePooling, ByPrefix, OpenAIErrors, "vLLM classification"},
	{"/score", "POST", "score", JSONBody, normalize.ModePooling, ByPrefix, OpenAIErrors, "vLLM score"},
	{"/v1/score", "POST", "score", JSONBody, normalize.ModePooling, ByPrefix, OpenAIErrors, "vLLM score"},
	{"/rerank", "POST", "rerank", JSONBody, normalize.ModePooling, ByPrefix, OpenAIErrors, "vLLM rerank (Jina and Cohere shapes)"},
	{"/v1/rerank", "POST", "rerank", JSONBody, normalize.ModePooling, ByPrefix, OpenAIErrors, "vLLM rerank"},
	{"/v2/rerank", "POST", "rerank", JSONBody, normalize.ModePooling, ByPrefix, OpenAIErrors, "vLLM rerank (Cohere v2 shape)"},
	{"/invocations", "POST", "invocations", JSONBody, normalize.ModeNative, ByPrefix, OpenAIErrors, "native raw JSON, routed on the canonical bytes of its routing members"},
	{"/v1/audio/transcriptions", "POST", "audio_transcriptions", MultipartBody, normalize.ModeAuto, LeastLoaded, OpenAIErrors, "OpenAI audio transcriptions: the upload streamed through to a replica serving the form's model"},
	{"/v1/audio/translations", "POST", "audio_translations", MultipartBody, normalize.ModeAuto, LeastLoaded, OpenAIErrors, "OpenAI audio translations: the upload streamed through to a replica serving the form's model"},
	{"/tokenize", "POST", "tokenize", JSONBody, normalize.ModeNative, LeastLoaded, OpenAIErrors, "the model's tokenizer"},
	{"/detokenize", "POST", "detokenize", JSONBody, normalize.ModeNative, LeastLoaded, OpenAIErrors, "the model's tokenizer, backwards"},
	{"/version", "GET", "version", NoBody, normalize.ModeAuto, LeastLoaded, OpenAIErrors, "the engine's version, from a healthy replica"},
	{"/v1/models", "GET, HEAD", "models", NoBody, normalize.ModeAuto, FanOut, OpenAIErrors, "the fleet's models and adapters, merged with vLLM's fields"},
	{"/v1/explain", "POST", "explain", JSONBody, normalize.ModeAuto, Local, OpenAIErrors, "where a request body of any JSON route would go and why, as JSON"},
}

// Other is the route label of every path the table does not hold, so
// that the label's values stay bounded.
const Other = "other"

// All is the route table, in order.
func All() []Route { return append([]Route(nil), table...) }

// At is the table's i-th route, for a caller that keeps pointers to the
// routes (the server's handlers); Len is their number.
func At(i int) *Route { return &table[i] }

// Len is the number of routes.
func Len() int { return len(table) }

// Lookup is the table's route for a request path (the mux's own match
// for the patterns with a wildcard); nil for a path it does not hold.
func Lookup(path string) *Route {
	for i := range table {
		rt := &table[i]
		if rt.Path == path {
			return rt
		}
	}
	if rest, ok := strings.CutPrefix(path, "/v1/responses/"); ok && rest != "" {
		id, cancel := strings.CutSuffix(rest, "/cancel")
		if id != "" && !strings.Contains(id, "/") {
			if cancel {
				return Lookup("/v1/responses/{id}/cancel")
			}
			return Lookup("/v1/responses/{id}")
		}
	}
	return nil
}

// ErrorShapeFor is the error shape of path's route (OpenAI's for a path
// the table does not hold).
func ErrorShapeFor(path string) ErrorShape {
	if rt := Lookup(path); rt != nil {
		return rt.Errors
	}
	return OpenAIErrors
}

// Allows reports whether method is one of the route's.
func (rt *Route) Allows(method string) bool {
	for m := range strings.SplitSeq(rt.Methods, ", ") {
		if m == method {
			return true
		}
	}
	return false
}

// List names the routes, method and path, for a 404's message.
func List() string {
	var b strings.Builder
	for i, rt := range table {
		if i > 0 {
			b.WriteString(", ")
		}
		m, _, _ := strings.Cut(rt.Methods, ",")
		b.WriteString(m + " " + rt.Path)
	}
	return b.String()
}

// Keyed reports whether the route's body is normalized and routed on its
// key: what the endpoint picker keys.
func (rt *Route) Keyed() bool {
	return rt.Body == JSONBody && (rt.Routing == ByPrefix || rt.Routing == ByPrefixOrStored)
}

// AnthropicErrorType is the error type Anthropic's API gives an HTTP
// status.
func AnthropicErrorType(status int) string {
	switch status {
	case 400, 405, 415, 422:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	}
	return "api_error"
}
