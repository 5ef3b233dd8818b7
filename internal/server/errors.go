package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/route"
)

var errNoCandidates = route.ErrNoCandidates

// upstreamError maps a failure to reach any backend.
func upstreamError(err error) error {
	if err == nil {
		err = errors.New("no backend answered")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &pipeline.Error{Status: http.StatusGatewayTimeout, Code: "timeout", Message: "request timed out: " + err.Error()}
	}
	if errors.Is(err, context.Canceled) {
		return &pipeline.Error{Status: 499, Code: "canceled", Message: "client canceled the request"}
	}
	return &pipeline.Error{Status: http.StatusBadGateway, Code: "upstream_unreachable", Message: err.Error()}
}

// writeError writes err in OpenAI's error shape.
func writeError(w http.ResponseWriter, err error) {
	writeErrorAs(w, routes.OpenAIErrors, err)
}

// writeErrorFor writes err in the error shape of r's route.
func writeErrorFor(w http.ResponseWriter, r *http.Request, err error) {
	writeErrorAs(w, routes.ErrorShapeFor(r.URL.Path), err)
}

// writeErrorAs writes err in the given shape.
func writeErrorAs(w http.ResponseWriter, shape routes.ErrorShape, err error) {
	re := pipeline.AsError(err)
	if s := re.RetryAfterSeconds(); s > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	if shape == routes.AnthropicErrors {
		writeJSON(w, re.Status, map[string]any{
			"type": "error", "error": map[string]any{"type": routes.AnthropicErrorType(re.Status), "message": re.Message},
		})
		return
	}
	var param any // null unless a field is at fault, as OpenAI answers
	if re.Param != "" {
		param = re.Param
	}
	writeJSON(w, re.Status, map[string]any{
		"error": map[string]any{"message": re.Message, "type": re.Type(), "param": param, "code": re.Code},
	})
}

// connectError maps err to a Connect error with the matching code.
func connectError(err error) *connect.Error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	re := pipeline.AsError(err)
	cerr := connect.NewError(codeForStatus(re.Status), errors.New(re.Message))
	if s := re.RetryAfterSeconds(); s > 0 {
		cerr.Meta().Set("Retry-After", strconv.Itoa(s))
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
	return &pipeline.Error{Status: status, Code: "upstream_error", Message: fmt.Sprintf("backend answered %d: %s", status, msg)}
}
