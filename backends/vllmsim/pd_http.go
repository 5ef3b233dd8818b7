package vllmsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Prefill/decode disaggregation over HTTP, on the engine's transfer model
// (transfer.go), in both wire protocols a router speaks:
//
// vLLM's KV connector (NixlConnector): a request whose kv_transfer_params
// say do_remote_decode is a prefill leg: it runs with HoldKV, and its
// answer carries kv_transfer_params naming this worker (remote_engine_id,
// remote_host, remote_port, remote_request_id, remote_block_ids). A
// request whose kv_transfer_params say do_remote_prefill is a decode leg:
// the worker reads the transfer from remote_host:remote_port (POST
// /kv/fetch, standing for NIXL's side channel and read) and imports it.
//
// SGLang's bootstrap: a request with bootstrap_room is a prefill leg on a
// prefill worker and a decode leg on any other. The prefill leg runs with
// HoldKV, publishes its room and answers once the decode worker has taken
// the KV (or its client has gone, which drops the KV). The decode leg asks
// bootstrap_host:bootstrap_port (POST /kv/bootstrap, the prefill worker's
// own HTTP port) for the room, waiting up to BootstrapWait for the prefill
// to publish it, and imports what it gets.
//
// A vLLM transfer that is unknown, expired or already taken is a KV load
// failure: by default (Config.KVLoadFailure "recompute", vLLM's
// kv_load_failure_policy default) the decode worker computes the prompt
// itself and says so in X-Vllmsim-Kv-Load-Failure; with "fail" it answers
// 500. An SGLang room whose prefill leg failed, or that does not appear in
// time, fails the decode leg with a 500, as SGLang's bootstrap does.

// Roles of a replica (Config.Role).
const (
	RoleBoth    = "both"
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// BootstrapWait is how long a decode leg waits for its SGLang prefill
// twin to publish its room.
const BootstrapWait = 30 * time.Second

// KV load failure policies (Config.KVLoadFailure).
const (
	KVLoadRecompute = "recompute"
	KVLoadFail      = "fail"
)

// checkKVLoadFailure validates Config.KVLoadFailure ("" is recompute).
func checkKVLoadFailure(p string) (string, error) {
	switch p {
	case "", KVLoadRecompute:
		return KVLoadRecompute, nil
	case KVLoadFail:
		return p, nil
	}
	return "", fmt.Errorf("vllmsim: KV load failure policy %q is not recompute or fail", p)
}

// checkRole validates Config.Role ("" is both).
func checkRole(role string) (string, error) {
	switch role {
	case "", RoleBoth:
		return RoleBoth, nil
	case RolePrefill, RoleDecode:
		return role, nil
	}
	return "", fmt.Errorf("vllmsim: role %q is not prefill, decode or both", role)
}

// pdRequest is a request's part in a split, carried from pdHandler to the
// engine request (admit) and the answer (writeWhole) through its context.
type pdRequest struct {
	// hold: a prefill leg, whose KV the engine keeps for a decode worker.
	hold bool
	// vllm: answer kv_transfer_params naming host:port.
	vllm       bool
	host, port string
	// imported is the prompt prefix a decode leg read from its prefill
	// worker.
	imported int
	// id and held are the finished prefill leg's engine request and the
	// tokens it holds, set by writeWhole.
	id       RequestID
	held     int
	finished bool
}

type pdKey struct{}

func withPD(ctx context.Context, pd *pdRequest) context.Context {
	return context.WithValue(ctx, pdKey{}, pd)
}

// pdFrom is the request's split part, nil for an ordinary request.
func pdFrom(ctx context.Context) *pdRequest {
	pd, _ := ctx.Value(pdKey{}).(*pdRequest)
	return pd
}

// engineFields sets an engine request's split fields.
func (pd *pdRequest) engineFields(req *Request) {
	if pd != nil {
		req.HoldKV, req.ImportTokens = pd.hold, pd.imported
		if pd.hold {
			req.MaxTokens = 1 // a prefill leg makes one token
		}
	}
}

// answerFields adds to a whole answer what the split needs: for a
// finished vLLM prefill leg, the kv_transfer_params a decode leg takes.
func (pd *pdRequest) answerFields(done Event, m map[string]any) map[string]any {
	if pd == nil || !pd.hold {
		return m
	}
	pd.id, pd.held, pd.finished = done.ID, done.HeldTokens, true
	if pd.vllm {
		blocks := make([]int, done.HeldTokens/BlockSize)
		for i := range blocks {
			blocks[i] = i
		}
		port, _ := strconv.Atoi(pd.port)
		m["kv_transfer_params"] = map[string]any{
			"do_remote_prefill": true, "do_remote_decode": false,
			"remote_engine_id": engineID, "remote_host": pd.host, "remote_port": port,
			"remote_request_id": strconv.FormatUint(uint64(done.ID), 10), "remote_block_ids": blocks, "tp_size": 1,
		}
	}
	return m
}

// engineID names every vllmsim engine in kv_transfer_params: a decode
// worker reads a transfer from the host and port beside it.
const engineID = "vllmsim"

// pdFields are the split members of a generation request.
type pdFields struct {
	KV *struct {
		DoRemoteDecode  bool   `json:"do_remote_decode"`
		DoRemotePrefill bool   `json:"do_remote_prefill"`
		RemoteEngineID  string `json:"remote_engine_id"`
		RemoteHost      string `json:"remote_host"`
		RemotePort      int    `json:"remote_port"`
		RemoteRequestID string `json:"remote_request_id"`
		RemoteBlockIDs  []int  `json:"remote_block_ids"`
	} `json:"kv_transfer_params"`
	BootstrapHost json.RawMessage `json:"bootstrap_host"`
	BootstrapPort json.RawMessage `json:"bootstrap_port"`
	BootstrapRoom json.RawMessage `json:"bootstrap_room"`
}

// pdHandler serves a generation path (serve: r.chat, r.completion) with
// its split members read first.
func (r *Replica) pdHandler(serve func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		body, ok := readBody(w, req)
		if !ok {
			return
		}
		var f pdFields
		if json.Unmarshal(body, &f) != nil {
			serve(w, req, body) // it answers the bad body
			return
		}
		switch {
		case f.KV != nil && f.KV.DoRemoteDecode:
			r.vllmPrefill(w, req, body, serve)
		case f.KV != nil && f.KV.DoRemotePrefill:
			r.vllmDecode(w, req, body, &f, serve)
		case len(f.BootstrapRoom) > 0 && string(f.BootstrapRoom) != "null":
			r.sglangLeg(w, req, body, &f, serve)
		case req.Header.Get(PrefillerHeader) != "" && r.role != RolePrefill:
			r.sidecarSplit(w, req, body, req.Header.Get(PrefillerHeader), serve)
		default:
			serve(w, req, body)
		}
	}
}

// refuseRole answers a leg this replica's role does not take.
func (r *Replica) refuseRole(w http.ResponseWriter, leg string) bool {
	if r.role == RoleBoth || r.role == leg {
		return false
	}
	writeError(w, http.StatusBadRequest, fmt.Sprintf("this worker's role is %s: it takes no %s leg", r.role, leg))
	return true
}

// vllmPrefill serves a vLLM prefill leg: it runs holding its KV and
// answers kv_transfer_params naming this worker.
func (r *Replica) vllmPrefill(w http.ResponseWriter, req *http.Request, body []byte, serve func(http.ResponseWriter, *http.Request, []byte)) {
	if r.refuseRole(w, RolePrefill) {
		return
	}
	host, port, err := net.SplitHostPort(req.Host)
	if err != nil {
		writeError(w, http.StatusBadRequest, "prefill leg: cannot tell this worker's address from Host "+strconv.Quote(req.Host))
		return
	}
	serve(w, req.WithContext(withPD(req.Context(), &pdRequest{hold: true, vllm: true, host: host, port: port})), body)
}

// vllmDecode serves a vLLM decode leg: it reads the transfer its
// kv_transfer_params name, then runs importing it.
func (r *Replica) vllmDecode(w http.ResponseWriter, req *http.Request, body []byte, f *pdFields, serve func(http.ResponseWriter, *http.Request, []byte)) {
	if r.refuseRole(w, RoleDecode) {
		return
	}
	kv := f.KV
	if kv.RemoteEngineID != engineID || kv.RemoteHost == "" || kv.RemotePort <= 0 || kv.RemotePort > 65535 {
		writeError(w, http.StatusBadRequest, "kv_transfer_params: do_remote_prefill needs remote_engine_id \"vllmsim\", remote_host and remote_port")
		return
	}
	if len(kv.RemoteBlockIDs) == 0 { // the prompt filled no whole block
		serve(w, req, body)
		return
	}
	addr := net.JoinHostPort(kv.RemoteHost, strconv.Itoa(kv.RemotePort))
	n, err := fetchKV(req.Context(), addr, "/kv/fetch", map[string]any{"remote_request_id": kv.RemoteRequestID})
	if err != nil {
		msg := fmt.Sprintf("KV transfer %s from %s failed: %v", kv.RemoteRequestID, addr, err)
		if r.cfg.KVLoadFailure == KVLoadFail {
			writeError(w, http.StatusInternalServerError, msg)
			return
		}
		w.Header().Set("X-Vllmsim-Kv-Load-Failure", msg)
		serve(w, req, body) // recompute
		return
	}
	serve(w, req.WithContext(withPD(req.Context(), &pdRequest{imported: n})), body)
}

// handleKVFetch is a prefill worker's side of a vLLM transfer: the decode
// worker takes the KV of remote_request_id.
func (r *Replica) handleKVFetch(w http.ResponseWriter, req *http.Request) {
	var f struct {
		ID string `json:"remote_request_id"`
	}
	if !readJSON(w, req, &f) {
		return
	}
	id, err := strconv.ParseUint(f.ID, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("remote_request_id %.64q is not a request of this engine", f.ID))
		return
	}
	r.answerFetch(w, RequestID(id))
}

// answerFetch hands over transfer id: its tokens, or 404 when this
// engine does not hold it.
func (r *Replica) answerFetch(w http.ResponseWriter, id RequestID) {
	n, err := r.Fetch(id)
	if errors.Is(err, ErrUnknownTransfer) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"tokens": n})
}

// fetchKV asks the worker at addr for a transfer: the tokens it hands
// over, or why not.
func fetchKV(ctx context.Context, addr, path string, body any) (int, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, strings.NewReader(string(b)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Tokens int `json:"tokens"`
		Error  struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20))
	if err := dec.Decode(&out); err != nil {
		return 0, fmt.Errorf("%s answered %d, not JSON: %w", addr, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s answered %d: %s", addr, resp.StatusCode, out.Error.Message)
	}
	return out.Tokens, nil
}
