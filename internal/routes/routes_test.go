package routes_test

import (
	"testing"

	"github.com/prefixgate/prefixgate/internal/routes"
)

// TestLookup: exact paths, the stored-response paths with their id, and
// nothing else.
func TestLookup(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/chat/completions":          "/v1/chat/completions",
		"/v1/responses":                 "/v1/responses",
		"/v1/responses/resp_1":          "/v1/responses/{id}",
		"/v1/responses/resp_1/cancel":   "/v1/responses/{id}/cancel",
		"/v1/responses/":                "",
		"/v1/responses/a/b":             "",
		"/v1/responses/resp_1/cancel/x": "",
		"/v1/messages":                  "/v1/messages",
		"/v1/audio/transcriptions":      "/v1/audio/transcriptions",
		"/nope":                         "",
		"/v1/chat/completions/":         "",
	} {
		got := ""
		if rt := routes.Lookup(path); rt != nil {
			got = rt.Path
		}
		if got != want {
			t.Errorf("Lookup(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestTableIsWellFormed: one route per path, each with methods, a label
// and a doc line; Anthropic's errors on the Messages path alone.
func TestTableIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, rt := range routes.All() {
		if seen[rt.Path] || rt.Methods == "" || rt.Label == "" || rt.Label == routes.Other || rt.Doc == "" {
			t.Errorf("route %+v: duplicate, or without methods, label or doc", rt)
		}
		seen[rt.Path] = true
		if (rt.Errors == routes.AnthropicErrors) != (rt.Path == "/v1/messages") {
			t.Errorf("%s: %s errors", rt.Path, rt.Errors)
		}
		if rt.Keyed() && rt.Body != routes.JSONBody {
			t.Errorf("%s: keyed without a JSON body", rt.Path)
		}
	}
	if routes.ErrorShapeFor("/unknown") != routes.OpenAIErrors || routes.ErrorShapeFor("/v1/messages") != routes.AnthropicErrors {
		t.Error("ErrorShapeFor")
	}
}
