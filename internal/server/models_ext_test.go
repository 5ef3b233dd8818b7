package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// TestModelsStateContextLength: GET /v1/models carries each model's
// max_model_len, the smallest the backends serving it state, so that a
// client (bench) can check its prompts against the fleet before sending.
func TestModelsStateContextLength(t *testing.T) {
	backend := func(models string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/models" {
				fmt.Fprintf(w, `{"object":"list","data":[%s]}`, models)
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	// vLLM states its context length on the base model's entry; a LoRA
	// adapter (lora-a) runs within it.
	a := backend(`{"id":"m","max_model_len":8192},{"id":"lora-a","parent":"m"}`)
	b := backend(`{"id":"m","max_model_len":4096}`)
	c := backend(`{"id":"n"}`)
	srv, err := server.New(server.Config{Backends: []string{a, b, c}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := serveFor(t, srv)
	want := map[string]int{"m": 4096, "lora-a": 8192, "n": 0}
	for {
		status, _, raw := call(t, http.MethodGet, base+"/v1/models", "", nil, nil)
		var list struct {
			Data []struct {
				ID          string `json:"id"`
				MaxModelLen *int   `json:"max_model_len"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &list); err != nil || status != http.StatusOK {
			t.Fatalf("GET /v1/models: status %d, body %s (%v)", status, raw, err)
		}
		got := map[string]int{}
		for _, m := range list.Data {
			if m.MaxModelLen != nil {
				got[m.ID] = *m.MaxModelLen
			} else {
				got[m.ID] = 0
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if len(got) == len(want) && got["m"] != 0 {
			t.Fatalf("models %v, want %v (the smallest stated length; none stated: left out)", got, want)
		}
		time.Sleep(5 * time.Millisecond) // until the start-up probes have answered
	}
}
