package prefixgate

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// Calls return the *connect.Error the router sent (or connect produced for
// a transport failure) unchanged; these helpers read it. Local errors
// (*SpecError, *SyntaxError) have code connect.CodeUnknown.

// Code returns err's Connect code: connect.CodeOf, re-exported so callers
// need not import connect to branch on it.
func Code(err error) connect.Code { return connect.CodeOf(err) }

// RetryAfter returns how long the router asked the caller to wait before a
// retry (its Retry-After metadata, set when every candidate backend is at
// its bound), and whether it asked.
func RetryAfter(err error) (time.Duration, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0, false
	}
	v := strings.TrimSpace(ce.Meta().Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	secs, perr := strconv.Atoi(v)
	if perr != nil || secs < 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

// IsRetryable reports whether the same call may succeed later: Unavailable
// (no healthy backend for the model right now, or the backend failed), or
// ResourceExhausted with a Retry-After (every backend at its bound; a body
// over the size limit is ResourceExhausted too, without Retry-After, and is
// not retryable). NotFound, a model no backend serves, is not retryable.
func IsRetryable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable:
		return true
	case connect.CodeResourceExhausted:
		_, ok := RetryAfter(err)
		return ok
	}
	return false
}
