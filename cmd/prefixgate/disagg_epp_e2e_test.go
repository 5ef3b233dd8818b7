package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/prefixgate/prefixgate/internal/epp"
)

// TestEPPSplitsForTheSidecar runs `prefixgate epp` over a prefill and a
// decode worker and asks it, as a gateway does, over a real gRPC ext_proc
// stream: the destination is the decode worker and x-prefiller-host-port
// names the prefill worker. The test then does what llm-d's routing
// sidecar does with them (the vLLM prefill leg to the prefiller, the
// decode leg to the destination), the decode worker reports the prefix as
// cached, and once the response has passed both picks are released.
func TestEPPSplitsForTheSidecar(t *testing.T) {
	binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), pdDeadline)
	defer cancel()
	p, d := startPDWorker(ctx, t, "prefill", "p"), startPDWorker(ctx, t, "decode", "d")
	_, grpcAddr, metricsAddr, _ := startEPP(t, "--backend", "prefill+http://"+p.addr+",decode+http://"+d.addr,
		"--disagg-split", "always", "--probe-interval", "200ms")
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	s, err := extprocv3.NewExternalProcessorClient(cc).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"model": frontDoorModel, "max_tokens": 4,
		"messages": []map[string]string{{"role": "system", "content": pdSystem("epp")}, {"role": "user", "content": "hello"}}})
	send := func(r *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		t.Helper()
		if err := s.Send(r); err != nil {
			t.Fatal(err)
		}
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	headers := func(kv ...string) *extprocv3.HttpHeaders {
		hm := &corev3.HeaderMap{}
		for i := 0; i+1 < len(kv); i += 2 {
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
		}
		return &extprocv3.HttpHeaders{Headers: hm}
	}
	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: headers(":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json")}})
	r := send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}})
	set := map[string]string{}
	for _, h := range r.GetRequestBody().GetResponse().GetHeaderMutation().GetSetHeaders() {
		set[strings.ToLower(h.GetHeader().GetKey())] = string(h.GetHeader().GetRawValue())
	}
	if set[epp.DestinationHeader] != d.addr || set[epp.PrefillerHeader] != p.addr {
		t.Fatalf("destination %q, prefiller %q; want %s and %s (%v)", set[epp.DestinationHeader], set[epp.PrefillerHeader], d.addr, p.addr, set)
	}
	canonical := r.GetRequestBody().GetResponse().GetBodyMutation().GetBody()

	// The sidecar's two legs, in vLLM's protocol.
	pre := sidecarPost(t, set[epp.PrefillerHeader], strings.Replace(string(canonical), "{", `{"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false},`, 1))
	var pa struct {
		KV json.RawMessage `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(pre, &pa); err != nil || len(pa.KV) == 0 {
		t.Fatalf("prefill leg answered %s: %v", pre, err)
	}
	dec := sidecarPost(t, set[epp.DestinationHeader], strings.Replace(string(canonical), "{", `{"kv_transfer_params":`+string(pa.KV)+",", 1))
	var da struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.Unmarshal(dec, &da); err != nil || da.Usage.Details.Cached < da.Usage.PromptTokens-2*16 || da.Usage.Details.Cached <= 0 {
		t.Fatalf("decode leg answered %s: %v", dec, err)
	}

	// The response passes the gateway: both picks are released.
	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: headers(":status", "200", "content-type", "application/json")}})
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both picks released", func() bool {
		m, err := metricsText("http://" + metricsAddr)
		return err == nil && metricSum(m, "prefixgate_epp_split_decisions_total") == 1 && hasSeries(m, "prefixgate_disagg_prefill_in_flight", p.addr) &&
			hasSeries(m, "prefixgate_backend_in_flight", d.addr) &&
			metricSum(m, "prefixgate_backend_in_flight") == 0 && metricSum(m, "prefixgate_disagg_prefill_in_flight") == 0
	})
}

// sidecarPost sends a leg to a worker and returns its 200 answer.
func sidecarPost(t *testing.T, addr, body string) []byte {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s: %v", addr, resp.StatusCode, b, err)
	}
	return b
}

// TestEPPSplitThroughEnvoy runs a split through real Envoy: Envoy with
// the bootstrap of docs/epp.md asks `prefixgate epp` over a prefill and a
// decode worker, sends the request to the decode worker with
// x-prefiller-host-port, and the decode worker, doing what llm-d's
// sidecar and its worker do together, prefills there and imports the KV.
func TestEPPSplitThroughEnvoy(t *testing.T) {
	envoy := envoyBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), pdDeadline)
	defer cancel()
	p, d := startPDWorker(ctx, t, "prefill", "p"), startPDWorker(ctx, t, "decode", "d")
	_, eppAddr, metricsAddr, _ := startEPP(t, "--backend", "prefill+http://"+p.addr+",decode+http://"+d.addr,
		"--disagg-split", "always", "--probe-interval", "200ms")
	gw, admin := freeAddr(t), freeAddr(t)
	startEnvoy(t, envoy, writeBootstrap(t, gatewayConfig{admin: admin, gateway: gw, eppAddr: eppAddr, replicas: []string{p.addr, d.addr}}), admin)
	for i, stream := range []bool{false, true} {
		a := chatVia(t, gw, pdSystem(fmt.Sprint("envoy", i)), "hello", 3, stream)
		if a.status != http.StatusOK || a.replica != "d-0" {
			t.Fatalf("request %d: status %d from %q: %s", i, a.status, a.replica, a.body)
		}
		if a.cached <= 0 || a.cached < a.prompt-2*16 {
			t.Fatalf("request %d: %d of %d prompt tokens cached on the decode worker; want those the prefill worker computed", i, a.cached, a.prompt)
		}
	}
	m, err := metricsText("http://" + p.addr)
	if err != nil || metricSum(m, "vllm:prompt_tokens_total") == 0 {
		t.Fatalf("the prefill worker computed no prompt: %v", err)
	}
	waitFor(t, "both picks released", func() bool {
		m, err := metricsText("http://" + metricsAddr)
		return err == nil && metricSum(m, "prefixgate_epp_split_decisions_total") == 2 && hasSeries(m, "prefixgate_disagg_prefill_in_flight", p.addr) &&
			metricSum(m, "prefixgate_backend_in_flight") == 0 && metricSum(m, "prefixgate_disagg_prefill_in_flight") == 0
	})
}
