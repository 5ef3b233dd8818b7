package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// Error is an error with the HTTP status, OpenAI error code and message a
// client should see. Every front door writes it in its own shape (an
// OpenAI error body, a Connect error, an ext_proc immediate response).
type Error struct {
	Status  int
	Code    string
	Param   string // the request field at fault, if one is
	Message string
	// RetryAfter, when positive, is how long the client should wait
	// before trying again (429).
	RetryAfter time.Duration
	// BodyUnread is set when the error was found before any of the body
	// was read (a Content-Length over the limit).
	BodyUnread bool
}

func (e *Error) Error() string { return e.Message }

// Type is the OpenAI error type for e's status.
func (e *Error) Type() string {
	switch {
	case e.Status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case e.Status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, for a
// Retry-After header; 0 when the client need not wait.
func (e *Error) RetryAfterSeconds() int {
	if e.RetryAfter <= 0 {
		return 0
	}
	return int((e.RetryAfter + time.Second - 1) / time.Second)
}

// NewError is an error with the status and code a client should see, for a
// front door's own refusals. A status outside 400..599 gives a plain error,
// which AsError maps to 500.
func NewError(status int, code, msg string) error {
	if status < 400 || status > 599 {
		return errors.New(msg)
	}
	return &Error{Status: status, Code: code, Message: msg}
}

// AsError returns err's Error, or a 500 "internal" with err's message when
// err carries none.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}

// Status is the HTTP status a client should see for err.
func Status(err error) int { return AsError(err).Status }

// normalizeError maps a normalizer or decoder error: a body over a limit is
// 413, an unknown encoding 415, anything else invalid input (400).
func (p *Pipeline) normalizeError(err error) error {
	status := http.StatusBadRequest
	switch {
	case errors.Is(err, normalize.ErrTooLarge):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, normalize.ErrUnsupportedEncoding):
		status = http.StatusUnsupportedMediaType
	}
	code := normalize.ErrorCode(err)
	return &Error{Status: status, Code: code, Message: "invalid request body: " + err.Error() + p.cfg.LimitHint(code)}
}

// PickError maps a routing failure for a request for model: saturation is
// 429 with Retry-After, a model no backend lists is 404 (trying again will
// not help), a served model with no healthy backend is 503.
func (p *Pipeline) PickError(err error, model string) error {
	var se *route.SaturatedError
	var pe *Error
	switch {
	case errors.As(err, &pe): // already an answer (flow control's 429)
		return pe
	case errors.Is(err, route.ErrUnknownModel):
		return &Error{Status: http.StatusNotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("model %s is not served by any backend; the fleet serves %s", QuoteModel(model), p.ServedModels())}
	case errors.As(err, &se):
		return &Error{Status: http.StatusTooManyRequests, Code: "saturated",
			Message: "every backend is at its concurrency bound: " + err.Error(), RetryAfter: se.RetryAfter}
	case errors.Is(err, route.ErrNoCandidates) && model != "":
		return &Error{Status: http.StatusServiceUnavailable, Code: "no_backend",
			Message: fmt.Sprintf("no healthy backend serves model %s: %s", QuoteModel(model), WhyNoneHealthy(p.router.Status(), model))}
	case errors.Is(err, route.ErrNoCandidates):
		return &Error{Status: http.StatusServiceUnavailable, Code: "no_backend",
			Message: "no healthy backend: " + WhyNoneHealthy(p.router.Status(), "")}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Code: "timeout", Message: "request timed out while waiting for a backend"}
	case errors.Is(err, context.Canceled):
		return &Error{Status: 499, Code: "canceled", Message: "client canceled the request"}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}

// QuoteModel quotes a client's model name for a message, cut to 128 bytes:
// the name is the client's input and may be megabytes long.
func QuoteModel(model string) string {
	if len(model) > 128 {
		return strconv.Quote(model[:128]) + "…"
	}
	return strconv.Quote(model)
}

// ServedModels lists the models and adapters the fleet's backends list,
// sorted, at most 20, for an unknown-model message.
func (p *Pipeline) ServedModels() string {
	var all []string
	for _, st := range p.router.Status() {
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

// ResponseNotFound is the 404 for a stored response the router cannot
// reach: unknown (backend "") or stored on a backend that is gone or
// unhealthy. param is the body member that named it ("" for an id in the
// path).
func ResponseNotFound(param, id, backend string) error {
	msg := fmt.Sprintf("response %.300q is not known to this router (it was not answered through it, or it has been evicted)", id)
	if backend != "" {
		msg = fmt.Sprintf("response %.300q is stored on backend %s, which is gone or unhealthy", id, backend)
	}
	return &Error{Status: http.StatusNotFound, Code: "response_not_found", Param: param, Message: msg}
}
