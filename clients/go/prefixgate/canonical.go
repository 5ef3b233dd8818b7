package prefixgate

import (
	"github.com/prefixgate/prefixgate/normalize"
)

// Mode is the request schema: how the top level is ordered and how the
// routing text is taken.
type Mode = normalize.Mode

// The request schemas.
const (
	ModeAuto       = normalize.ModeAuto
	ModeChat       = normalize.ModeChat
	ModeCompletion = normalize.ModeCompletion
	ModeNative     = normalize.ModeNative
	ModeResponses  = normalize.ModeResponses
	ModeMessages   = normalize.ModeMessages
	ModePooling    = normalize.ModePooling
)

// KeyOptions selects the mode, group and routing window of a key.
type KeyOptions = normalize.KeyOptions

// RouteInfo is a routing key and what it was computed from.
type RouteInfo = normalize.RouteInfo

// SyntaxError reports why and where a body was rejected: "offset N: reason".
type SyntaxError = normalize.SyntaxError

// ParseMode parses "auto", "chat", "completion" or "native".
func ParseMode(s string) (Mode, error) { return normalize.ParseMode(s) }

// Canonicalize validates body and returns its canonical form in the given
// mode (ModeAuto detects the schema).
func Canonicalize(body []byte, mode Mode) ([]byte, error) {
	out, _, err := normalize.AppendCanonical(make([]byte, 0, len(body)), body, normalize.Options{Mode: mode})
	return out, err
}

// Key canonicalizes body in opts.Mode and returns the routing key of the
// canonical form, exactly as the router computes it.
func Key(body []byte, opts KeyOptions) (RouteInfo, error) {
	_, ri, err := normalize.Normalize(make([]byte, 0, len(body)), body, normalize.Options{Mode: opts.Mode}, opts)
	return ri, err
}

// CanonicalizeAndKey returns both the canonical form and its routing key.
func CanonicalizeAndKey(body []byte, opts KeyOptions) ([]byte, RouteInfo, error) {
	return normalize.Normalize(make([]byte, 0, len(body)), body, normalize.Options{Mode: opts.Mode}, opts)
}

// FormatKey prints a key as 16 lowercase hex digits.
func FormatKey(k uint64) string { return normalize.FormatKey(k) }
