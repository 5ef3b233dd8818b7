package vllmsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// room is one SGLang bootstrap room: the meeting of a prefill leg and its
// decode leg, whichever comes first.
type room struct {
	// ready closes when the prefill leg has published its transfer, or
	// given up (failed).
	ready  chan struct{}
	id     RequestID
	empty  bool // the prompt filled no whole block: nothing to move
	failed bool
	// taken closes when the decode leg has taken the transfer.
	taken   chan struct{}
	prefill bool // a prefill leg claimed it
}

// rooms are the rooms a worker's legs are meeting in, at most
// MaxHeldTransfers.
type rooms struct {
	mu sync.Mutex
	m  map[uint64]*room
}

// claim returns room n, made if new; false when there are too many.
func (rs *rooms) claim(n uint64, prefill bool) (*room, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = make(map[uint64]*room)
	}
	rm, ok := rs.m[n]
	if !ok {
		if len(rs.m) >= MaxHeldTransfers {
			return nil, false
		}
		rm = &room{ready: make(chan struct{}), taken: make(chan struct{})}
		rs.m[n] = rm
	}
	if prefill {
		if rm.prefill {
			return nil, false // a second prefill leg for one room
		}
		rm.prefill = true
	}
	return rm, true
}

// publish says the prefill leg of room n holds transfer id (or, with
// failed, that it has none).
func (rs *rooms) publish(n uint64, rm *room, id RequestID, empty, failed bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	select {
	case <-rm.ready:
		return
	default:
	}
	rm.id, rm.empty, rm.failed = id, empty, failed
	close(rm.ready)
	if failed {
		delete(rs.m, n)
	}
}

// take marks room n's transfer taken by its decode leg; false if it was
// already.
func (rs *rooms) take(n uint64, rm *room) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m[n] == rm {
		delete(rs.m, n)
	}
	select {
	case <-rm.taken:
		return false
	default:
		close(rm.taken)
		return true
	}
}

// leave forgets room n when neither leg will come back to it: a decode
// leg that stops waiting for a prefill leg that never claimed it, or a
// prefill leg that gives up.
func (rs *rooms) leave(n uint64, rm *room, prefill bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m[n] == rm && (prefill || !rm.prefill) {
		delete(rs.m, n)
	}
}

// sglangRoom reads a leg's bootstrap_room: a number, or an array of one
// (vllmsim serves one prompt per request).
func sglangRoom(raw json.RawMessage) (uint64, error) {
	var n uint64
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var ns []uint64
	if err := json.Unmarshal(raw, &ns); err != nil || len(ns) != 1 {
		return 0, fmt.Errorf("bootstrap_room: must be a non-negative integer or an array of one (vllmsim serves one prompt per request)")
	}
	return ns[0], nil
}

// sglangLeg serves a request with a bootstrap_room: the prefill leg on a
// prefill worker, the decode leg on any other.
func (r *Replica) sglangLeg(w http.ResponseWriter, req *http.Request, body []byte, f *pdFields, serve func(http.ResponseWriter, *http.Request, []byte)) {
	n, err := sglangRoom(f.BootstrapRoom)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if r.role == RolePrefill {
		r.sglangPrefill(w, req, body, n, serve)
		return
	}
	var host string
	var port int
	if json.Unmarshal(f.BootstrapHost, &host) != nil || json.Unmarshal(f.BootstrapPort, &port) != nil {
		var hs []string
		var ps []int
		if json.Unmarshal(f.BootstrapHost, &hs) != nil || json.Unmarshal(f.BootstrapPort, &ps) != nil || len(hs) != 1 || len(ps) != 1 {
			writeError(w, http.StatusBadRequest, "bootstrap_host and bootstrap_port: a decode leg needs the prefill worker's bootstrap address")
			return
		}
		host, port = hs[0], ps[0]
	}
	if host == "" || port <= 0 || port > 65535 {
		writeError(w, http.StatusBadRequest, "bootstrap_host and bootstrap_port: a decode leg needs the prefill worker's bootstrap address")
		return
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	got, err := fetchKV(req.Context(), addr, "/kv/bootstrap", map[string]uint64{"bootstrap_room": n})
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("KV transfer of bootstrap_room %d from %s failed: %v", n, addr, err))
		return
	}
	serve(w, req.WithContext(withPD(req.Context(), &pdRequest{imported: got})), body)
}

// sglangPrefill serves a prefill leg: one token, holding the KV, then the
// room published and the answer held until the decode leg has taken the
// KV, the client has gone, or BootstrapWait has passed.
func (r *Replica) sglangPrefill(w http.ResponseWriter, req *http.Request, body []byte, n uint64, serve func(http.ResponseWriter, *http.Request, []byte)) {
	rm, ok := r.rooms.claim(n, true)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("bootstrap_room %d: already taken, or too many rooms open", n))
		return
	}
	published := false
	defer func() {
		if !published { // failed, or the replica crashed under it
			r.rooms.publish(n, rm, 0, false, true)
		}
	}()
	pd := &pdRequest{hold: true}
	held := &heldAnswer{header: http.Header{}}
	serve(held, req.WithContext(withPD(req.Context(), pd)), wholeBody(body))
	if !pd.finished {
		held.sendTo(w)
		return
	}
	published = true
	r.rooms.publish(n, rm, pd.id, pd.held == 0, false)
	r.mu.Lock()
	crashCh := r.crashCh
	r.mu.Unlock()
	t := time.NewTimer(BootstrapWait)
	defer t.Stop()
	select {
	case <-rm.taken:
		held.sendTo(w)
		return
	case <-req.Context().Done():
	case <-crashCh:
	case <-t.C:
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("bootstrap_room %d: no decode worker took the KV within %v", n, BootstrapWait))
	}
	if r.rooms.take(n, rm) { // nobody will: drop it
		r.ReleaseTransfer(pd.id)
	}
}

// handleBootstrap is a prefill worker's bootstrap server: a decode leg
// takes room's KV, waiting up to BootstrapWait for the prefill leg.
func (r *Replica) handleBootstrap(w http.ResponseWriter, req *http.Request) {
	var f struct {
		Room *uint64 `json:"bootstrap_room"`
	}
	if !readJSON(w, req, &f) {
		return
	}
	if f.Room == nil {
		writeError(w, http.StatusBadRequest, "bootstrap_room: field required")
		return
	}
	n := *f.Room
	rm, ok := r.rooms.claim(n, false)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "too many bootstrap rooms open")
		return
	}
	r.mu.Lock()
	crashCh := r.crashCh
	r.mu.Unlock()
	t := time.NewTimer(BootstrapWait)
	defer t.Stop()
	select {
	case <-rm.ready:
	case <-req.Context().Done():
		r.rooms.leave(n, rm, false)
		return
	case <-crashCh:
		dropConnection(w)
		return
	case <-t.C:
		r.rooms.leave(n, rm, false)
		writeError(w, http.StatusGatewayTimeout, fmt.Sprintf("bootstrap_room %d: no prefill leg within %v", n, BootstrapWait))
		return
	}
	switch {
	case rm.failed:
		writeError(w, http.StatusNotFound, fmt.Sprintf("bootstrap_room %d: its prefill leg failed", n))
	case !r.rooms.take(n, rm):
		writeError(w, http.StatusNotFound, fmt.Sprintf("bootstrap_room %d: already taken", n))
	case rm.empty:
		writeJSON(w, http.StatusOK, map[string]int{"tokens": 0})
	default:
		r.answerFetch(w, rm.id)
	}
}

// wholeBody is a prefill leg's body answered whole: SGLang's prefill
// worker answers once, whatever the leg asked.
func wholeBody(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	delete(m, "stream_options")
	m["stream"] = json.RawMessage("false")
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// heldAnswer keeps an answer until it may be sent.
type heldAnswer struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (h *heldAnswer) Header() http.Header { return h.header }

func (h *heldAnswer) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}

func (h *heldAnswer) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return h.buf.Write(b)
}

// Flush does nothing: the answer goes out whole.
func (h *heldAnswer) Flush() {}

func (h *heldAnswer) sendTo(w http.ResponseWriter) {
	if h.status == 0 {
		return // the handler wrote nothing (a dropped connection)
	}
	for k, v := range h.header {
		w.Header()[k] = v
	}
	w.WriteHeader(h.status)
	w.Write(h.buf.Bytes())
}
