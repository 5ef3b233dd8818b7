package vllmsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
)

// PrefillerHeader names, on a request to a decode worker, the prefill
// worker (host:port) its prefill runs on: llm-d's routing sidecar, in
// front of a vLLM decode worker, reads it from the endpoint picker's
// answer. A replica that is not a prefill worker does what the sidecar
// and its worker do together: the vLLM prefill leg to that worker, then
// the request itself importing the KV.
const PrefillerHeader = "X-Prefiller-Host-Port"

// sidecarSplit serves a request that names its prefill worker. A prefill
// leg that fails leaves the replica to compute the prompt itself, saying
// why in X-Vllmsim-Prefill-Failure.
func (r *Replica) sidecarSplit(w http.ResponseWriter, req *http.Request, body []byte, prefiller string, serve func(http.ResponseWriter, *http.Request, []byte)) {
	if _, _, err := net.SplitHostPort(prefiller); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %q is not host:port", PrefillerHeader, prefiller))
		return
	}
	params, err := prefillVia(req.Context(), prefiller, req.URL.Path, body)
	if err != nil {
		w.Header().Set("X-Vllmsim-Prefill-Failure", err.Error())
		serve(w, req, body)
		return
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		serve(w, req, body) // it answers the bad body
		return
	}
	m["kv_transfer_params"] = params
	decodeBody, _ := json.Marshal(m)
	var f pdFields
	if err := json.Unmarshal(decodeBody, &f); err != nil || f.KV == nil || !f.KV.DoRemotePrefill {
		w.Header().Set("X-Vllmsim-Prefill-Failure", "the prefill answer's kv_transfer_params do not ask for a remote prefill")
		serve(w, req, body)
		return
	}
	r.vllmDecode(w, req, decodeBody, &f, serve)
}

// prefillVia sends the vLLM prefill leg of body to the worker at addr and
// returns its answer's kv_transfer_params.
func prefillVia(ctx context.Context, addr, path string, body []byte) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	m["kv_transfer_params"] = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false}`)
	m["stream"], m["max_tokens"] = json.RawMessage("false"), json.RawMessage("1")
	delete(m, "stream_options")
	b, _ := json.Marshal(m)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("prefill worker %s answered %d: %.200s", addr, resp.StatusCode, raw)
	}
	var a struct {
		KV json.RawMessage `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(raw, &a); err != nil || len(a.KV) == 0 || string(a.KV) == "null" {
		return nil, fmt.Errorf("prefill worker %s answered no kv_transfer_params", addr)
	}
	return a.KV, nil
}
