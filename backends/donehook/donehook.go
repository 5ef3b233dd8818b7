// Package donehook names the contract between the contexts of the
// requests backends.Pool.Forward sends and the pool's HTTP/1.1 client: a
// context that runs a function once it is done, registered by number. The
// router's HTTP/1.1 front door (internal/h1front) makes such contexts.
//
// The backend client must stop a write or read in progress on its
// connection when the request's context ends. context.AfterFunc does
// that for any context, at the price of a context, two closures and a
// link into the parent per request; a context that implements Context
// takes the function itself, for none of these. A context that does not
// gets context.AfterFunc, so the contract only ever saves work: the
// front door's context asserts it at compile time, and the client's
// choice is tested against a front door request's context.
package donehook

import "context"

// Context is a context.Context that runs functions once it is done, as
// context.AfterFunc would run them for it.
type Context interface {
	context.Context
	// AddDoneHook arranges for f to run in its own goroutine once the
	// context is done, and returns a number naming the arrangement. When
	// the context is done already, f runs at once (in its own goroutine)
	// and the number is 0.
	AddDoneHook(f func()) (id uint64)
	// RemoveDoneHook keeps the function AddDoneHook named id from
	// running; it reports whether it did (false: it ran or is running,
	// or id is 0), as context.AfterFunc's stop does.
	RemoveDoneHook(id uint64) bool
}

// AfterFunc runs f once ctx is done, through ctx's own hooks when it is
// a Context, else through context.AfterFunc; stop reports, as
// context.AfterFunc's does, whether it kept f from running. The Stop it
// returns is a value, so that a Context's registration allocates nothing.
func AfterFunc(ctx context.Context, f func()) Stop {
	if dc, ok := ctx.(Context); ok {
		return Stop{hooks: dc, id: dc.AddDoneHook(f)}
	}
	return Stop{fn: context.AfterFunc(ctx, f)}
}

// Stop undoes one AfterFunc.
type Stop struct {
	hooks Context // nil: fn, context.AfterFunc's stop
	id    uint64
	fn    func() bool
}

// Stop keeps the function from running; it reports whether it did. The
// zero Stop has nothing to stop and reports false.
func (s *Stop) Stop() bool {
	switch {
	case s.hooks != nil:
		return s.hooks.RemoveDoneHook(s.id)
	case s.fn != nil:
		return s.fn()
	}
	return false
}

// Hooked reports whether ctx takes done functions itself (a Context).
func Hooked(ctx context.Context) bool {
	_, ok := ctx.(Context)
	return ok
}
