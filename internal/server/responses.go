package server

import (
	"bytes"
	"context"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/h1front"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/internal/sticky"
	"github.com/prefixgate/prefixgate/route"
)

// A vLLM replica keeps the Responses it produced in its own memory: a
// follow-up (previous_response_id), a GET or a cancel naming one works on
// that replica alone. The router learns each response's id from the
// answer as it passes (a plain answer's "id", or a stream's
// response.created event), remembers id → backend in a bounded table
// (responses.max_ids, least recently used evicted first), and sends a
// request that names the id to that backend while it is healthy. An id it
// does not know, or whose backend is gone or unhealthy, is a 404 in
// OpenAI's shape: never a silent wrong replica.

// pinFor says where a request of rt must or would rather go: the backend
// that stored the response its body names (previous_response_id), else the
// backend of its session (the session header), else nowhere in
// particular. body is the canonical body.
func (s *Server) pinFor(rt *routes.Route, tenant string, body []byte, hdr http.Header) (pin, error) {
	if rt == nil {
		return pin{}, nil
	}
	if rt.Routing == routes.ByPrefixOrStored {
		if prev := gjson.GetBytes(body, "previous_response_id"); prev.Type == gjson.String && prev.Str != "" {
			backend, ok := s.responses.Get(sticky.TenantKey(tenant, prev.Str))
			if !ok {
				return pin{}, pipeline.ResponseNotFound("previous_response_id", prev.Str, "")
			}
			return pin{backend: backend, stored: prev.Str, param: "previous_response_id"}, nil
		}
	}
	var pn pin
	if vs := hdr[s.sessionHeader]; len(vs) > 0 && vs[0] != "" && len(vs[0]) <= sticky.MaxKeyBytes {
		pn.session = sticky.TenantKey(tenant, vs[0])
		pn.backend, _ = s.sessions.Get(pn.session)
	}
	return pn, nil
}

// learnResponseID remembers the id of a plain Responses answer.
func (x *exchange) learnResponseID(body []byte) {
	if id := gjson.GetBytes(body, "id"); id.Type == gjson.String {
		x.s.responses.Put(sticky.TenantKey(x.tenant, id.Str), x.d.Backend)
	}
}

// learnCreatedEvent remembers the id of a streamed response from its
// response.created event; data is one event's JSON.
func (x *exchange) learnCreatedEvent(data []byte) {
	if !bytes.Contains(data, []byte(`"response.created"`)) {
		return
	}
	r := gjson.ParseBytes(data)
	if r.Get("type").Str != "response.created" {
		return
	}
	if id := r.Get("response.id"); id.Type == gjson.String {
		x.s.responses.Put(sticky.TenantKey(x.tenant, id.Str), x.d.Backend)
	}
}

// handleStored serves GET /v1/responses/{id} and POST
// /v1/responses/{id}/cancel on the backend that stored the response.
func (s *Server) handleStored(rt *routes.Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !rt.Allows(r.Method) {
			s.fail(w, r, rt, nil, methodNotAllowed(w, r, rt.Methods))
			return
		}
		id := r.PathValue("id")
		backend, ok := s.responses.Get(sticky.TenantKey(pipeline.TenantFrom(r.Context()), id))
		if !ok {
			s.fail(w, r, rt, nil, pipeline.ResponseNotFound("", id, ""))
			return
		}
		d, err := s.rt().PickMember(backend, route.Request{}, false)
		if err != nil {
			s.fail(w, r, rt, nil, pipeline.ResponseNotFound("", id, backend))
			return
		}
		s.forwardPicked(w, r, rt, &d, nil)
	}
}

// forwardPicked forwards r (its path, and body when not nil, else its query) to
// the backend picked in d and relays the answer as it comes; it ends d.
func (s *Server) forwardPicked(w http.ResponseWriter, r *http.Request, rt *routes.Route, d *route.Decision, body []byte) {
	ctx, cancel := h1front.WithRequestTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	b := d.Member.(*backends.Backend)
	var resp *http.Response
	var err error
	if body != nil {
		resp, err = s.pool.Forward(ctx, b, r.Method, r.URL.Path, body, forwardHeaders(r.Header))
	} else {
		// No body: the path with its query (GET ...?stream=true).
		path := r.URL.Path
		if r.URL.RawQuery != "" {
			path += "?" + r.URL.RawQuery
		}
		resp, err = s.pool.ForwardStream(ctx, b, r.Method, path, http.NoBody, 0, forwardHeaders(r.Header))
	}
	s.relayPicked(w, r, rt, d, resp, err)
}

// relayPicked relays the answer of a request forwarded to the backend
// picked in d (or the error of forwarding it) and ends d.
func (s *Server) relayPicked(w http.ResponseWriter, r *http.Request, rt *routes.Route, d *route.Decision, resp *http.Response, err error) {
	if err != nil {
		d.DoneWith(failedOutcome(err))
		s.fail(w, r, rt, d, upstreamError(err))
		return
	}
	defer resp.Body.Close()
	s.record(rt.Label, &exchange{d: d}, resp.StatusCode)
	w.Header()[BackendHeader] = []string{d.Backend}
	for _, h := range [...]string{"Content-Type", "Cache-Control", "Content-Length"} {
		if vs := resp.Header[h]; len(vs) > 0 {
			w.Header()[h] = vs[:1]
		}
	}
	w.WriteHeader(resp.StatusCode)
	err = copyStream(w, resp.Body, !plainBody(resp), nil)
	if r.Context().Err() == context.Canceled {
		err = nil
	}
	d.DoneWith(route.Outcome{Err: err, FirstByte: true, Status: resp.StatusCode})
}

// fail counts and writes an error on rt's path; d is the pick, if any.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, rt *routes.Route, d *route.Decision, err error) {
	var x *exchange
	if d != nil {
		x = &exchange{d: d}
	}
	s.record(rt.Label, x, pipeline.Status(err))
	writeErrorAs(w, rt.Errors, err)
}
