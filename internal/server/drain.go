package server

import (
	"fmt"
	"net/http"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/pipeline"
)

// Draining a backend takes it out of the candidate set without touching
// what it is serving: no new requests reach it, those in flight finish, and
// it keeps its ring positions, so its keys come home when it is undrained.
// An operator drains through the configuration (drain, applied at start and
// on every reload) or through the admin listener (AdminHandler); the admin
// drain lasts until an admin undrain or a configuration that lists the
// backend and then stops listing it. Either way the pool's backend state
// changes, and the router, readiness and metrics read it from there.

// applyDrain hands the configuration's drained set to the pool, which owns
// drain as it owns every backend state (backends.Pool.SetDrained).
func (s *Server) applyDrain(names []string) {
	for _, name := range s.pool.SetDrained(names) {
		s.log.Warn("drain: no such backend yet; it is drained when it appears", "backend", name)
	}
}

// AdminHandler serves the operator's endpoints, meant for a listener of
// their own (serve's admin.listen), never the public one:
//
//	GET  /admin/backends                 every backend: name, address, state, in flight;
//	                                     the last discovery error, if any
//	POST /admin/backends/{name}/drain    no new requests; those in flight finish
//	POST /admin/backends/{name}/undrain  back to the state its probes say
//
// Each answers JSON; an unknown backend is 404.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/backends", func(w http.ResponseWriter, r *http.Request) {
		out := []adminBackend{}
		inflight := s.inFlightByName()
		for _, b := range s.pool.Backends() {
			out = append(out, adminBackendOf(b, inflight))
		}
		body := map[string]any{"backends": out}
		if err := s.pool.DiscoveryError(); err != nil {
			// The pool keeps its last good list; say why it is not newer.
			body["discovery_error"] = err.Error()
		}
		writeJSON(w, http.StatusOK, body)
	})
	set := func(drain bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			name := r.PathValue("name")
			set := s.pool.Undrain
			if drain {
				set = s.pool.Drain
			}
			if !set(name) {
				writeError(w, &pipeline.Error{Status: http.StatusNotFound, Code: "unknown_backend",
					Message: fmt.Sprintf("no backend named %.200q; GET /admin/backends lists them", name)})
				return
			}
			s.log.Info("backend drain set by admin", "backend", name, "drain", drain)
			b, _ := s.pool.Get(name)
			writeJSON(w, http.StatusOK, adminBackendOf(b, s.inFlightByName()))
		}
	}
	mux.HandleFunc("POST /admin/backends/{name}/drain", set(true))
	mux.HandleFunc("POST /admin/backends/{name}/undrain", set(false))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &pipeline.Error{Status: http.StatusNotFound, Code: "unknown_url",
			Message: fmt.Sprintf("unknown admin path %s %.200q; see GET /admin/backends", r.Method, r.URL.Path)})
	})
	return mux
}

// adminBackend is one backend as the admin endpoints show it.
type adminBackend struct {
	Name     string   `json:"name"`
	Address  string   `json:"address"`
	State    string   `json:"state"`
	InFlight int64    `json:"in_flight"`
	Models   []string `json:"models"`
}

func adminBackendOf(b *backends.Backend, inflight map[string]int) adminBackend {
	// A copy, never nil: an empty list is [] in the JSON, not null.
	models := append([]string{}, b.Models()...)
	return adminBackend{Name: b.Name, Address: b.URL.String(), State: b.State().String(), InFlight: int64(inflight[b.Name]), Models: models}
}

// inFlightByName is the router's in-flight count per member: the one count
// there is (the router's, released by each request's Decision).
func (s *Server) inFlightByName() map[string]int {
	out := map[string]int{}
	for _, st := range s.rt().Status() {
		out[st.Name] = st.InFlight
	}
	return out
}
