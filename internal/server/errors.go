package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

var errNoCandidates = route.ErrNoCandidates

// requestError is an error with the HTTP status, OpenAI error code and
// message a client should see.
type requestError struct {
	status     int
	code       string
	param      string // the request field at fault, if one is
	msg        string
	retryAfter time.Duration
	// bodyUnread is set when the error was found before any of the body
	// was read (a Content-Length over the limit).
	bodyUnread bool
}

func (e *requestError) Error() string { return e.msg }

// normalizeError maps a normalizer error: a body over a limit is 413, an
// unknown encoding 415, anything else invalid input (400).
func normalizeError(err error) error {
	status := http.StatusBadRequest
	switch {
	case errors.Is(err, normalize.ErrTooLarge):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, normalize.ErrUnsupportedEncoding):
		status = http.StatusUnsupportedMediaType
	}
	return &requestError{status: status, code: normalize.ErrorCode(err), msg: "invalid request body: " + err.Error()}
}

// pickError maps a routing failure: saturation is 429 with Retry-After, a
// model no backend lists is 404 (trying again will not help), a served model
// with no healthy backend is 503.
func (s *Server) pickError(err error, model string) error {
	var se *route.SaturatedError
	switch {
	case errors.Is(err, route.ErrUnknownModel):
		return &requestError{status: http.StatusNotFound, code: "model_not_found", param: "model",
			msg: fmt.Sprintf("model %s is not served by any backend; the fleet serves %s", quoteModel(model), s.servedModels())}
	case errors.As(err, &se):
		return &requestError{status: http.StatusTooManyRequests, code: "saturated",
			msg: "every backend is at its concurrency bound: " + err.Error(), retryAfter: se.RetryAfter}
	case errors.Is(err, route.ErrNoCandidates) && model != "":
		return &requestError{status: http.StatusServiceUnavailable, code: "no_backend",
			msg: fmt.Sprintf("no healthy backend serves model %s: %s", quoteModel(model), whyNoneHealthy(s.rt().Status(), model))}
	case errors.Is(err, route.ErrNoCandidates):
		return &requestError{status: http.StatusServiceUnavailable, code: "no_backend",
			msg: "no healthy backend: " + whyNoneHealthy(s.rt().Status(), "")}
	case errors.Is(err, context.DeadlineExceeded):
		return &requestError{status: http.StatusGatewayTimeout, code: "timeout", msg: "request timed out while waiting for a backend"}
	case errors.Is(err, context.Canceled):
		return &requestError{status: 499, code: "canceled", msg: "client canceled the request"}
	}
	return &requestError{status: http.StatusInternalServerError, code: "internal", msg: err.Error()}
}

// upstreamError maps a failure to reach any backend.
func upstreamError(err error) error {
	if err == nil {
		err = errors.New("no backend answered")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &requestError{status: http.StatusGatewayTimeout, code: "timeout", msg: "request timed out: " + err.Error()}
	}
	if errors.Is(err, context.Canceled) {
		return &requestError{status: 499, code: "canceled", msg: "client canceled the request"}
	}
	return &requestError{status: http.StatusBadGateway, code: "upstream_unreachable", msg: err.Error()}
}

func asRequestError(err error) *requestError {
	var re *requestError
	if errors.As(err, &re) {
		return re
	}
	return &requestError{status: http.StatusInternalServerError, code: "internal", msg: err.Error()}
}

// writeError writes err in OpenAI's error shape.
func writeError(w http.ResponseWriter, err error) {
	re := asRequestError(err)
	typ := "invalid_request_error"
	switch {
	case re.status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case re.status >= 500:
		typ = "server_error"
	}
	if re.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((re.retryAfter+time.Second-1)/time.Second)))
	}
	var param any // null unless a field is at fault, as OpenAI answers
	if re.param != "" {
		param = re.param
	}
	writeJSON(w, re.status, map[string]any{
		"error": map[string]any{"message": re.msg, "type": typ, "param": param, "code": re.code},
	})
}

// quoteModel quotes a client's model name for a message, cut to 128 bytes:
// the name is the client's input and may be megabytes long.
func quoteModel(model string) string {
	if len(model) > 128 {
		return strconv.Quote(model[:128]) + "…"
	}
	return strconv.Quote(model)
}

// servedModels lists the models and adapters the fleet's backends list,
// sorted, at most 20, for an unknown-model message.
func (s *Server) servedModels() string {
	var all []string
	for _, st := range s.rt().Status() {
		all = append(all, st.Models...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) == 0 {
		return "no model list yet"
	}
	more := ""
	if len(all) > 20 {
		more = fmt.Sprintf(" and %d more", len(all)-20)
		all = all[:20]
	}
	return strings.Join(all, ", ") + more
}

// connectError maps err to a Connect error with the matching code.
func connectError(err error) *connect.Error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	re := asRequestError(err)
	cerr := connect.NewError(codeForStatus(re.status), errors.New(re.msg))
	if re.retryAfter > 0 {
		cerr.Meta().Set("Retry-After", strconv.Itoa(int((re.retryAfter+time.Second-1)/time.Second)))
	}
	return cerr
}

// codeForStatus maps an HTTP status to a Connect code, consistently for
// router errors and for errors that backends return.
func codeForStatus(status int) connect.Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return connect.CodeInvalidArgument
	case http.StatusUnauthorized:
		return connect.CodeUnauthenticated
	case http.StatusForbidden:
		return connect.CodePermissionDenied
	case http.StatusNotFound:
		return connect.CodeNotFound
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return connect.CodeResourceExhausted
	case 499:
		return connect.CodeCanceled
	case http.StatusGatewayTimeout:
		return connect.CodeDeadlineExceeded
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return connect.CodeUnavailable
	case http.StatusNotImplemented:
		return connect.CodeUnimplemented
	}
	if status >= 500 {
		return connect.CodeInternal
	}
	return connect.CodeUnknown
}

// backendStatusError turns a non-2xx backend answer into an error that keeps
// its status and body.
func backendStatusError(status int, body []byte) error {
	msg := string(body)
	if len(msg) > 2048 {
		msg = msg[:2048] + "…"
	}
	return &requestError{status: status, code: "upstream_error", msg: fmt.Sprintf("backend answered %d: %s", status, msg)}
}
