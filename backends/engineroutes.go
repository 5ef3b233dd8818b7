package backends

import "slices"

// unserved lists, per engine, the REST paths of prefixgate's route table
// (internal/routes, the ServeMux patterns) that the engine does not serve
// at all, whatever it is started with. An engine without an entry serves
// every path: vLLM, which the table follows, and EngineAuto, an engine not
// known yet (its requests are forwarded and it answers for itself).
//
// llama.cpp's list was measured on llama-server (the build internal/llamafleet
// makes): each path answered llama-server's own 404 "File Not Found". The
// paths llama-server serves only when started with a flag (/v1/embeddings
// with --embeddings, /rerank and /v1/rerank with --reranking, audio
// transcriptions with an audio model) are forwarded, and its own 501 that
// names the flag is passed through. docs/backends.md has the table.
var unserved = [...][]string{
	EngineLlamaCpp: {
		"/v1/responses/{id}", "/v1/responses/{id}/cancel",
		"/pooling", "/classify", "/score", "/v1/score", "/v2/rerank",
		"/invocations", "/v1/audio/translations", "/version",
	},
}

// Serves reports whether the engine serves the route whose ServeMux
// pattern is path (false only for a path the engine is known to lack).
func (e Engine) Serves(path string) bool {
	if int(e) >= len(unserved) {
		return true
	}
	for _, p := range unserved[e] {
		if p == path {
			return false
		}
	}
	return true
}

var productNames = [...]string{EngineAuto: "an engine not yet detected", EngineVLLM: "vLLM", EngineSGLang: "SGLang", EngineLlamaCpp: "llama.cpp's llama-server"}

// Product is the engine's name for people, as errors show it:
// "llama.cpp's llama-server", "vLLM", "SGLang".
func (e Engine) Product() string {
	if int(e) < len(productNames) {
		return productNames[e]
	}
	return e.String()
}

// SomeEngineLacks reports whether any engine is known not to serve path,
// so that a route every engine serves needs no check per request.
func SomeEngineLacks(path string) bool {
	for e := range unserved {
		if !Engine(e).Serves(path) {
			return true
		}
	}
	return false
}

// Lacking returns, when the pool has backends and none of them serves the
// route whose pattern is path, the engines that lack it, each once in the
// pool's order; nil when some backend serves it or may (an engine not yet
// detected is given the benefit of the doubt).
func (p *Pool) Lacking(path string) []Engine {
	var lack []Engine
	for _, b := range p.members.Load().list {
		e := b.Engine()
		if e.Serves(path) {
			return nil
		}
		if !slices.Contains(lack, e) {
			lack = append(lack, e)
		}
	}
	return lack
}
