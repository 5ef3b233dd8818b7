package vllmsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// pdFleet starts one prefill and one decode replica.
func pdFleet(t *testing.T) (prefill, decode *Fleet) {
	t.Helper()
	cfg := fastConfig()
	cfg.KVLoadFailure = KVLoadFail
	cfg.Role = RolePrefill
	prefill = startFleet(t, 1, cfg)
	cfg.Role = RoleDecode
	decode = startFleet(t, 1, cfg)
	return prefill, decode
}

// longPrompt is a prompt of several whole blocks, distinct per tag.
func longPrompt(tag string) string {
	return tag + strings.Repeat(" the prompt goes on and on", 40)
}

type pdAnswer struct {
	KV    json.RawMessage `json:"kv_transfer_params"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		Details      struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

func postPD(t *testing.T, url, body string) (int, pdAnswer) {
	t.Helper()
	resp, b := post(t, url, body)
	var a pdAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %v: %s", url, err, b)
	}
	return resp.StatusCode, a
}

// TestVLLMTransfer: a prefill leg answers kv_transfer_params naming its
// worker; the decode leg with them reports the transferred prefix as
// cached and makes its tokens; the same transfer taken again fails.
func TestVLLMTransfer(t *testing.T) {
	prefill, decode := pdFleet(t)
	prompt := longPrompt("vllm")
	code, a := postPD(t, prefill.URLs()[0]+"/v1/completions", fmt.Sprintf(`{"model":"sim-model","prompt":%q,"max_tokens":1,"stream":false,
		"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`, prompt))
	if code != 200 || len(a.KV) == 0 || a.Usage.CompletionTokens != 1 {
		t.Fatalf("prefill leg: %d %s, %d tokens", code, a.KV, a.Usage.CompletionTokens)
	}
	var kv struct {
		DoRemotePrefill bool  `json:"do_remote_prefill"`
		RemotePort      int   `json:"remote_port"`
		Blocks          []int `json:"remote_block_ids"`
	}
	if err := json.Unmarshal(a.KV, &kv); err != nil || !kv.DoRemotePrefill || kv.RemotePort == 0 || len(kv.Blocks) == 0 {
		t.Fatalf("kv_transfer_params %s: %v", a.KV, err)
	}
	decodeBody := fmt.Sprintf(`{"model":"sim-model","prompt":%q,"max_tokens":5,"kv_transfer_params":%s}`, prompt, a.KV)
	code, d := postPD(t, decode.URLs()[0]+"/v1/completions", decodeBody)
	if code != 200 || d.Usage.CompletionTokens != 5 || d.Usage.Details.Cached != len(kv.Blocks)*BlockSize {
		t.Fatalf("decode leg: %d, %d tokens, %d cached, want %d: %s", code, d.Usage.CompletionTokens, d.Usage.Details.Cached, len(kv.Blocks)*BlockSize, d.Error.Message)
	}
	code, again := postPD(t, decode.URLs()[0]+"/v1/completions", decodeBody)
	if code != http.StatusInternalServerError || !strings.Contains(again.Error.Message, "unknown or expired") {
		t.Fatalf("a transfer taken twice: %d %q", code, again.Error.Message)
	}
	// With the default policy a failed read recomputes the prompt.
	cfg := fastConfig()
	cfg.Role = RoleDecode
	recompute := startFleet(t, 1, cfg)
	rresp, b := post(t, recompute.URLs()[0]+"/v1/completions", decodeBody)
	if rresp.StatusCode != 200 || !strings.Contains(rresp.Header.Get("X-Vllmsim-Kv-Load-Failure"), "unknown or expired") {
		t.Fatalf("a failed read with policy recompute: %d %q %s", rresp.StatusCode, rresp.Header.Get("X-Vllmsim-Kv-Load-Failure"), b)
	}
	// A request naming its prefiller (llm-d's sidecar header) runs both
	// legs from the decode worker.
	req, _ := http.NewRequest(http.MethodPost, decode.URLs()[0]+"/v1/completions", strings.NewReader(fmt.Sprintf(`{"model":"sim-model","prompt":%q,"max_tokens":2}`, longPrompt("sidecar"))))
	req.Header.Set(PrefillerHeader, strings.TrimPrefix(prefill.URLs()[0], "http://"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sc pdAnswer
	err = json.NewDecoder(resp.Body).Decode(&sc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || sc.Usage.Details.Cached == 0 || resp.Header.Get("X-Vllmsim-Prefill-Failure") != "" {
		t.Fatalf("sidecar split: %d, %d cached, %q: %v", resp.StatusCode, sc.Usage.Details.Cached, resp.Header.Get("X-Vllmsim-Prefill-Failure"), err)
	}
	// A decode worker takes no prefill leg.
	code, _ = postPD(t, decode.URLs()[0]+"/v1/completions", fmt.Sprintf(`{"model":"sim-model","prompt":%q,"kv_transfer_params":{"do_remote_decode":true}}`, prompt))
	if code != http.StatusBadRequest {
		t.Fatalf("prefill leg on a decode worker: %d", code)
	}
}

// TestSGLangBootstrap: both legs sent at once with one room; the decode
// leg reports the prefill's prompt as cached, and the prefill leg answers
// once it has been taken. A room whose prefill failed fails its decode.
func TestSGLangBootstrap(t *testing.T) {
	prefill, decode := pdFleet(t)
	addr := strings.TrimPrefix(prefill.URLs()[0], "http://")
	host, port, _ := strings.Cut(addr, ":")
	prompt := longPrompt("sglang")
	body := fmt.Sprintf(`{"model":"sim-model","messages":[{"role":"user","content":%q}],"max_tokens":4,"bootstrap_host":%q,"bootstrap_port":%s,"bootstrap_room":%d}`,
		prompt, host, port, uint64(1)<<62+7)
	var wg sync.WaitGroup
	var pcode int
	var pa pdAnswer
	wg.Go(func() { pcode, pa = postPD(t, prefill.URLs()[0]+"/v1/chat/completions", body) })
	code, d := postPD(t, decode.URLs()[0]+"/v1/chat/completions", body)
	wg.Wait()
	if pcode != 200 || pa.Usage.CompletionTokens != 1 {
		t.Fatalf("prefill leg: %d, %d tokens: %s", pcode, pa.Usage.CompletionTokens, pa.Error.Message)
	}
	if code != 200 || d.Usage.CompletionTokens != 4 || d.Usage.Details.Cached == 0 || d.Usage.Details.Cached < d.Usage.PromptTokens-2*BlockSize {
		t.Fatalf("decode leg: %d, %d tokens, %d of %d cached: %s", code, d.Usage.CompletionTokens, d.Usage.Details.Cached, d.Usage.PromptTokens, d.Error.Message)
	}
	// The decode leg waits in room 99; its prefill leg then fails.
	bad := strings.Replace(body, fmt.Sprint(uint64(1)<<62+7), "99", 1)
	wg.Go(func() { code, d = postPD(t, decode.URLs()[0]+"/v1/chat/completions", bad) })
	p := prefill.Replicas()[0]
	for waiting := false; !waiting; {
		p.rooms.mu.Lock()
		_, waiting = p.rooms.m[99]
		p.rooms.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	pcode, _ = postPD(t, prefill.URLs()[0]+"/v1/chat/completions", strings.Replace(bad, `"model":"sim-model"`, `"model":"no-such-model"`, 1))
	wg.Wait()
	if pcode != http.StatusNotFound || code != http.StatusInternalServerError || !strings.Contains(d.Error.Message, "prefill leg failed") {
		t.Fatalf("room of a failed prefill: prefill %d, decode %d %q", pcode, code, d.Error.Message)
	}
	if n := prefill.Replicas()[0].HeldTransfers(); n != 0 {
		t.Fatalf("prefill worker still holds %d transfers", n)
	}
}
