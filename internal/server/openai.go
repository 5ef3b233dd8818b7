package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/prefixgate/prefixgate/internal/h1front"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
)

// handleProxy serves a JSON route of the table: the body is normalized,
// routed on its key (or pinned: a stored response, a session) and
// forwarded to the same path.
func (s *Server) handleProxy(rt *routes.Route) http.HandlerFunc {
	routeName, mode, path := rt.Label, rt.Mode, rt.Path
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			err := methodNotAllowed(w, r, http.MethodPost)
			s.record(routeName, nil, err.Status)
			writeErrorAs(w, rt.Errors, err)
			return
		}
		if err := checkJSONContentType(r); err != nil {
			s.record(routeName, nil, pipeline.Status(err))
			writeErrorAs(w, rt.Errors, err)
			return
		}
		ctx, cancel := h1front.WithRequestTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		bp := getBodyBuffer()
		raw, err := s.readBody(r, w, *bp)
		h1front.BodyRead(ctx)
		// raw is dead once open has normalized it (the canonical copy is
		// what goes to the backend) and any error has been written.
		defer putBodyBuffer(bp, raw)
		if err != nil {
			s.record(routeName, nil, pipeline.Status(err))
			writeBodyError(w, r, err)
			return
		}
		x, err := s.openRoute(ctx, rt, path, mode, raw, r.Header.Get(GroupHeader), r.Header, w.Header())
		if err != nil {
			s.record(routeName, nil, pipeline.Status(err))
			writeErrorAs(w, rt.Errors, err)
			return
		}
		defer x.close()
		s.record(routeName, x, x.resp.StatusCode)
		// The backend's values are passed on as they are: the response's
		// header is ours and not written again, so sharing its slices
		// saves Set's copy and canonicalization per request.
		wh := w.Header()
		for _, h := range [...]string{"Content-Type", "Cache-Control"} {
			if vs := x.resp.Header[h]; len(vs) > 0 && vs[0] != "" {
				wh[h] = vs[:1]
			}
		}
		// A body of known length that is not an event stream is a plain
		// answer: pass its length on and send it in one write rather than
		// flushing each read as a chunk.
		stream := !plainBody(x.resp)
		if !stream {
			wh["Content-Length"] = []string{strconv.FormatInt(x.resp.ContentLength, 10)}
		}
		w.WriteHeader(x.resp.StatusCode)
		if err := x.relay(w, stream); err != nil {
			// Canceled: the client left, not the backend's failure. The
			// front door's request context also carries the request
			// timeout (h1front.WithRequestTimeout), which is the backend's.
			if r.Context().Err() != context.Canceled {
				x.err = err
			}
			s.log.Warn("stream ended early", "backend", x.d.Backend, "err", err)
		}
	}
}

// methodNotAllowed sets Allow and returns the 405 for a request whose
// method is not in allow (the first one allowed is the one to use).
func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) *pipeline.Error {
	w.Header().Set("Allow", allow)
	use, _, _ := strings.Cut(allow, ",")
	return &pipeline.Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: r.Method + " is not allowed on " + r.URL.Path + "; use " + use}
}

// plainBody reports whether a backend answer has a body of known length
// that is not a server-sent event stream.
func plainBody(resp *http.Response) bool {
	if resp.ContentLength < 0 || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return false
	}
	ct := resp.Header.Get("Content-Type")
	return !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "text/event-stream")
}

// forwardHeaders keeps the headers a backend may need; everything else
// (hop-by-hop, encodings, prefixgate's own) stays at the router.
func forwardHeaders(in http.Header) http.Header {
	out := make(http.Header, 4)
	// The names are canonical: looked up as they are, without Values'
	// canonicalization of each (it was 2% of the CPU).
	for _, k := range [...]string{"Authorization", "Traceparent", "Tracestate", "X-Request-Id"} {
		if v := in[k]; len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

// readAll reads a backend body, bounded.
func readAll(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, 256<<20))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
