package server_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prefixgate/prefixgate/internal/server"
)

const benchPrefillReply = `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],"usage":{"prompt_tokens":250,"completion_tokens":1,"total_tokens":251},"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"e","remote_host":"127.0.0.1","remote_port":1,"remote_block_ids":[0,1,2],"remote_request_id":"1"}}`

// benchPDBackend is benchBackend for either role: a vLLM prefill leg is
// answered with kv_transfer_params, anything else with the completion.
func benchPDBackend(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(body, []byte(`"do_remote_decode":true`)) {
			io.WriteString(w, benchPrefillReply)
			return
		}
		io.WriteString(w, benchReply)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkSplitRequest compares, on loopback with backends of zero
// inference time, one 1 KiB chat completion through the router: to a
// fleet without roles; to a prefill and a decode worker, run aggregated on
// the decode worker (the decision declines: split_min_tokens above the
// prompt); and split in each protocol. The split's extra time is its
// second leg's round trip and the router's work for it.
func BenchmarkSplitRequest(b *testing.B) {
	for _, bc := range []struct {
		name  string
		roles bool
		cfg   server.Config
	}{
		{name: "no-roles"},
		{name: "aggregated", roles: true, cfg: server.Config{}},
		{name: "split-vllm", roles: true, cfg: server.Config{Disagg: server.DisaggConfig{Split: server.SplitAlways, Protocol: server.ProtocolVLLM}}},
		{name: "split-sglang", roles: true, cfg: server.Config{Disagg: server.DisaggConfig{Split: server.SplitAlways, Protocol: server.ProtocolSGLang, BootstrapPort: -1}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := bc.cfg
			cfg.Route.SplitMinTokens = 1 << 20 // cost mode: never split
			d := benchPDBackend(b)
			cfg.Backends = []string{d.URL}
			if bc.roles {
				cfg.Backends = []string{"prefill+" + benchPDBackend(b).URL, "decode+" + d.URL}
			}
			s, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			front := httptest.NewServer(s.Handler())
			b.Cleanup(front.Close)
			postChats(b, front.URL+"/v1/chat/completions")
		})
	}
}
