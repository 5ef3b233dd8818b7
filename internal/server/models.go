package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prefixgate/prefixgate/backends"
)

// modelsFetchTimeout bounds each backend's answer to GET /v1/models.
const modelsFetchTimeout = 5 * time.Second

// maxModelsBody and maxModels bound what one backend's model list may
// hold.
const (
	maxModelsBody = 1 << 20
	maxModels     = 4096
)

// handleModels answers GET /v1/models with the union of the healthy
// backends' lists, each model's entry as the first backend listing it
// states it (vLLM's created, owned_by, root, parent, max_model_len,
// permission kept), and max_model_len the smallest any backend states for
// it, since any of them may get a request. A backend whose list cannot be
// read contributes the models its probes found.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	rt := routeFor("/v1/models")
	if !rt.allows(r.Method) {
		s.fail(w, r, rt, nil, methodNotAllowed(w, r, rt.Methods))
		return
	}
	var bs []*backends.Backend
	for _, b := range s.pool.Backends() {
		if b.Healthy() {
			bs = append(bs, b)
		}
	}
	lists := make([][]map[string]json.RawMessage, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() { lists[i] = s.fetchModels(r.Context(), b) })
	}
	wg.Wait()
	at := map[string]int{} // index in data
	data := []map[string]json.RawMessage{}
	for _, list := range lists {
		for _, m := range list {
			data = mergeModel(data, at, m)
		}
	}
	s.record(rt.Label, nil, http.StatusOK)
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// mergeModel adds one backend's model entry m to data.
func mergeModel(data []map[string]json.RawMessage, at map[string]int, m map[string]json.RawMessage) []map[string]json.RawMessage {
	var id string
	if json.Unmarshal(m["id"], &id) != nil || id == "" {
		return data
	}
	i, seen := at[id]
	if !seen {
		at[id] = len(data)
		return append(data, m)
	}
	var have, got int
	_ = json.Unmarshal(data[i]["max_model_len"], &have)
	if json.Unmarshal(m["max_model_len"], &got) == nil && got > 0 && (have <= 0 || got < have) {
		data[i]["max_model_len"] = m["max_model_len"]
	}
	return data
}

// fetchModels is b's model list: its own answer to GET /v1/models, or,
// when that fails, the models its probes found. An adapter entry without a
// max_model_len gets the backend's.
func (s *Server) fetchModels(ctx context.Context, b *backends.Backend) []map[string]json.RawMessage {
	ctx, cancel := context.WithTimeout(ctx, modelsFetchTimeout)
	defer cancel()
	var list struct {
		Data []map[string]json.RawMessage `json:"data"`
	}
	resp, err := s.pool.Forward(ctx, b, http.MethodGet, "/v1/models", nil, http.Header{})
	if err == nil {
		raw, rerr := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody))
		resp.Body.Close()
		if rerr != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &list) != nil {
			list.Data = nil
		}
	}
	if list.Data == nil {
		for _, m := range b.Models() {
			id, _ := json.Marshal(m)
			list.Data = append(list.Data, map[string]json.RawMessage{"id": id, "object": json.RawMessage(`"model"`), "owned_by": json.RawMessage(`"prefixgate"`)})
		}
	}
	list.Data = list.Data[:min(len(list.Data), maxModels)]
	if n := b.MaxModelLen(); n > 0 {
		for _, m := range list.Data {
			if _, ok := m["max_model_len"]; !ok {
				m["max_model_len"], _ = json.Marshal(n)
			}
		}
	}
	return list.Data
}
