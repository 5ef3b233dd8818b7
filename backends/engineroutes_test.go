package backends_test

import (
	"testing"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/routes"
)

// TestEngineServes: vLLM and an engine not yet known serve every route;
// llama-server lacks the routes measured on it and serves the others;
// every path an engine is said to lack is a path of the route table.
func TestEngineServes(t *testing.T) {
	lacks := map[string]bool{}
	for _, p := range []string{"/v1/responses/{id}", "/v1/responses/{id}/cancel", "/pooling", "/classify", "/score", "/v1/score", "/v2/rerank", "/invocations", "/v1/audio/translations", "/version"} {
		lacks[p] = true
	}
	for _, rt := range routes.All() {
		for _, e := range []backends.Engine{backends.EngineAuto, backends.EngineVLLM, backends.EngineSGLang} {
			if !e.Serves(rt.Path) {
				t.Errorf("%s does not serve %s", e, rt.Path)
			}
		}
		if got := backends.EngineLlamaCpp.Serves(rt.Path); got == lacks[rt.Path] {
			t.Errorf("llamacpp serves %s: %v", rt.Path, got)
		}
		if backends.SomeEngineLacks(rt.Path) != lacks[rt.Path] {
			t.Errorf("SomeEngineLacks(%s) = %v", rt.Path, !lacks[rt.Path])
		}
		delete(lacks, rt.Path)
	}
	for p := range lacks {
		t.Errorf("%s is not a path of the route table", p)
	}
	if got := backends.EngineLlamaCpp.Product(); got != "llama.cpp's llama-server" {
		t.Errorf("Product = %q", got)
	}
}
