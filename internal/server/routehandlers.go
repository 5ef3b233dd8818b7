package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/route"
)

// routeHandler is the handler of one route of the table; on a route some
// engine does not serve, it refuses first when no backend's engine does.
func (s *Server) routeHandler(rt *routes.Route) http.Handler {
	h := s.routeHandlerOf(rt)
	if backends.SomeEngineLacks(rt.Path) {
		return s.refuseUnserved(rt, h)
	}
	return h
}

// refuseUnserved answers 501 endpoint_not_supported, naming the path and
// the engines, when every backend runs an engine known not to serve rt,
// before any body is read or replica picked; otherwise it is next.
func (s *Server) refuseUnserved(rt *routes.Route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lack := s.pool.Lacking(rt.Path)
		if lack == nil {
			next.ServeHTTP(w, r)
			return
		}
		names := make([]string, len(lack))
		for i, e := range lack {
			names[i] = e.Product()
		}
		s.fail(w, r, rt, nil, pipeline.NewError(http.StatusNotImplemented, "endpoint_not_supported",
			fmt.Sprintf("%s does not serve %s, and no backend of this router runs an engine that does", strings.Join(names, " and "), rt.Path)))
	})
}

func (s *Server) routeHandlerOf(rt *routes.Route) http.Handler {
	switch rt.Routing {
	case routes.ByPrefix, routes.ByPrefixOrStored:
		return s.handleProxy(rt)
	case routes.ByStoredID:
		return s.handleStored(rt)
	case routes.LeastLoaded:
		if rt.Body == routes.MultipartBody {
			return s.handleUpload(rt)
		}
		return s.handleLeastLoaded(rt)
	case routes.FanOut:
		return http.HandlerFunc(s.handleModels)
	}
	return http.HandlerFunc(s.handleExplain) // the one Local route
}

// handleLeastLoaded serves a route that needs no particular replica
// (tokenize, detokenize, version): the body, if the route has one, is
// checked and put in canonical form as chat's is, then it goes to the
// least-loaded healthy backend serving its model.
func (s *Server) handleLeastLoaded(rt *routes.Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !rt.Allows(r.Method) {
			s.fail(w, r, rt, nil, methodNotAllowed(w, r, rt.Methods))
			return
		}
		var body []byte
		model := ""
		if rt.Body == routes.JSONBody {
			p, ok := s.readCanonical(w, r, rt)
			if !ok {
				return
			}
			body, model = p.Body, gjson.GetBytes(p.Body, "model").Str
		}
		name, err := s.leastLoaded(model, rt.Path)
		var d route.Decision
		if err == nil {
			d, err = s.rt().PickMember(name, route.Request{Model: model}, false)
		}
		if err != nil {
			s.fail(w, r, rt, nil, s.pipe.PickError(err, model))
			return
		}
		s.forwardPicked(w, r, rt, &d, body)
	}
}

// readCanonical reads r's JSON body within the limits and puts it in
// canonical form, or writes the error in rt's shape.
func (s *Server) readCanonical(w http.ResponseWriter, r *http.Request, rt *routes.Route) (pipeline.Prepared, bool) {
	if err := checkJSONContentType(r); err != nil {
		s.fail(w, r, rt, nil, err)
		return pipeline.Prepared{}, false
	}
	raw, err := s.readBody(r, w, nil)
	if err != nil {
		s.record(rt.Label, nil, pipeline.Status(err))
		writeBodyError(w, r, err)
		return pipeline.Prepared{}, false
	}
	p, err := s.pipe.Normalize(r.Context(), nil, raw, rt.Mode, r.Header.Get(GroupHeader), 0)
	if err != nil {
		s.fail(w, r, rt, nil, err)
		return pipeline.Prepared{}, false
	}
	return p, true
}

// leastLoaded is the healthy member serving model with the fewest
// requests in flight, among those whose engine serves path:
// route.ErrUnknownModel when no member serves the model,
// route.ErrNoCandidates when none that does is healthy.
func (s *Server) leastLoaded(model, path string) (string, error) {
	best, load, serves := "", 0, false
	byEngine := backends.SomeEngineLacks(path)
	for _, m := range s.rt().Status() {
		if model != "" && len(m.Models) > 0 && !contains(m.Models, model) {
			continue
		}
		if byEngine {
			if b, ok := s.pool.Get(m.Name); ok && !b.Engine().Serves(path) {
				continue
			}
		}
		serves = true
		if m.Healthy && (best == "" || m.Load < load) {
			best, load = m.Name, m.Load
		}
	}
	switch {
	case !serves:
		return "", route.ErrUnknownModel
	case best == "":
		return "", route.ErrNoCandidates
	}
	return best, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
