package server

import (
	"encoding/json"
	"net/http"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/routes"
)

// maxModels bounds the entries one backend's model list contributes.
const maxModels = 4096

// handleModels answers GET /v1/models with the union of the healthy
// backends' lists as their probes last read them (backends.ModelEntries):
// each model's entry as the first backend listing it wrote it (vLLM's
// created, owned_by, root, parent, max_model_len, permission kept), and
// max_model_len the smallest any backend states for it, since any of them
// may get a request. A backend whose list has no entries yet contributes
// the models it is known to serve.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	rt := routes.Lookup("/v1/models")
	if !rt.Allows(r.Method) {
		s.fail(w, r, rt, nil, methodNotAllowed(w, r, rt.Methods))
		return
	}
	at := map[string]int{} // index in data
	data := []map[string]json.RawMessage{}
	for _, b := range s.pool.Backends() {
		if !b.Healthy() {
			continue
		}
		for _, m := range modelEntries(b) {
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

// modelEntries is b's model list as its probe read it, or the models it
// is known to serve; an entry without a max_model_len (a LoRA adapter)
// gets the backend's.
func modelEntries(b *backends.Backend) []map[string]json.RawMessage {
	var list []map[string]json.RawMessage
	if raw := b.ModelEntries(); raw == nil || json.Unmarshal(raw, &list) != nil {
		list = nil
		for _, m := range b.Models() {
			id, _ := json.Marshal(m)
			list = append(list, map[string]json.RawMessage{"id": id, "object": json.RawMessage(`"model"`), "owned_by": json.RawMessage(`"prefixgate"`)})
		}
	}
	list = list[:min(len(list), maxModels)]
	if n := b.MaxModelLen(); n > 0 {
		for _, m := range list {
			if _, ok := m["max_model_len"]; !ok {
				m["max_model_len"], _ = json.Marshal(n)
			}
		}
	}
	return list
}
