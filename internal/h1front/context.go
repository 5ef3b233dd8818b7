package h1front

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/prefixgate/prefixgate/backends/donehook"
)

// The backend client registers its connection's expiry on the request's
// context through the donehook contract; this keeps the two in step.
var _ donehook.Context = (*requestContext)(nil)

// requestContext is the context of a request served by the HTTP/1.1 front
// door. It replaces, for the steady path, a cancel context from the front
// door plus a timer context from the handler plus an AfterFunc context
// from the forwarder: each of those allocated, linked itself into its
// parent's child map and (the timer context) put a fresh timer in the
// runtime's heap, on every request. Here the request timeout is a deadline the handler sets on the
// context the front door made, and the timer that enforces it is the
// connection's own, armed only for a request that is still running after
// h1WatchDelay (see armDeadline): shorter requests never touch it.
//
// It behaves as a context made by context.WithCancel and
// context.WithDeadline would: Done is closed and Err is set once, by
// cancel or by the deadline's timer; AfterFunc (which context.AfterFunc
// and derived contexts use for a parent that has it) runs each function
// in its own goroutine once it is done.
type requestContext struct {
	c    *clientConn
	body *requestBody // read on the handler's goroutine only

	mu       sync.Mutex
	done     chan struct{} // made when first asked for
	err      error
	deadline time.Time // zero: none
	// start is when observe began the request (zero: not observed); the
	// request timeout counts from it rather than read the clock again.
	start time.Time
	// armSees: the deadline was set before the body's end, where arm
	// starts its timer if it is near (handler's goroutine only).
	armSees  bool
	hooks    []doneHook
	nextHook uint64
	// hook0 holds the first hook (the forwarder registers one at a time)
	// without a slice of its own.
	hook0 [1]doneHook
}

type doneHook struct {
	id uint64
	f  func()
}

// closedDone is the Done channel of a context canceled before anyone
// asked for it.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (x *requestContext) Deadline() (time.Time, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.deadline, !x.deadline.IsZero()
}

func (x *requestContext) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		if x.err != nil {
			return closedDone
		}
		x.done = make(chan struct{})
	}
	return x.done
}

func (x *requestContext) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// Value: the front door's requests carry no values (net/http's server
// context values are not set for them either).
func (x *requestContext) Value(any) any { return nil }

// AfterFunc arranges for f to run in its own goroutine once x is done,
// as context.AfterFunc does; stop reports whether it kept f from running.
func (x *requestContext) AfterFunc(f func()) (stop func() bool) {
	id := x.AddDoneHook(f)
	return func() bool { return x.RemoveDoneHook(id) }
}

// AddDoneHook is AfterFunc naming f by a number instead of a stop
// closure, for the backend transport (one allocation less per request):
// f runs in its own goroutine once x is done, at once (with 0 returned)
// when it is done already.
func (x *requestContext) AddDoneHook(f func()) (id uint64) {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		go f()
		return 0
	}
	x.nextHook++
	id = x.nextHook
	if x.hooks == nil {
		x.hooks = x.hook0[:0]
	}
	x.hooks = append(x.hooks, doneHook{id: id, f: f})
	x.mu.Unlock()
	return id
}

// RemoveDoneHook keeps the function AddDoneHook named id from running;
// it reports whether it did (false: it ran or is running, or id is 0).
func (x *requestContext) RemoveDoneHook(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, h := range x.hooks {
		if h.id == id {
			x.hooks = append(x.hooks[:i], x.hooks[i+1:]...)
			return true
		}
	}
	return false
}

// cancel ends x with err unless it has ended already.
func (x *requestContext) cancel(err error) {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err = err
	if x.done == nil {
		x.done = closedDone
	} else {
		close(x.done)
	}
	hooks := x.hooks
	x.hooks = nil
	x.mu.Unlock()
	for _, h := range hooks {
		go h.f()
	}
}

// cancelRequest is the request's cancel function (a client gone, the
// handler returned).
func (x *requestContext) cancelRequest() { x.cancel(context.Canceled) }

// WithRequestTimeout bounds ctx to timeout from now, as
// context.WithTimeout does. A front door request's own context takes the
// deadline itself (no context, timer or child link is made); the cancel
// function returned for it does nothing, since the front door cancels
// the context when the handler returns.
func WithRequestTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if x, ok := ctx.(*requestContext); ok && x.setTimeout(timeout) {
		return x, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

// setTimeout sets x's deadline to timeout from the request's start; false when x already
// has one (a second bound goes to a derived context).
func (x *requestContext) setTimeout(timeout time.Duration) bool {
	now := x.start // observe's clock read, when it set one
	if now.IsZero() {
		now = time.Now()
	}
	deadline := now.Add(timeout)
	x.mu.Lock()
	if !x.deadline.IsZero() {
		x.mu.Unlock()
		return false
	}
	x.deadline = deadline
	x.mu.Unlock()
	if timeout <= 0 {
		x.cancel(context.DeadlineExceeded)
		return true
	}
	if timeout > h1WatchDelay && !x.body.read {
		// deadlineSet's case of an unread body and a far deadline, known
		// without its clock read and locks: the body's end (arm) sees to
		// the timer.
		x.armSees = true
		return true
	}
	x.c.deadlineSet(x, false)
	return true
}

// BodyRead tells a front door request's context that the handler has
// read the body it will read, to its end or not: from here on only a
// timer enforces the deadline (at the body's end the front door sees to
// that itself).
func BodyRead(ctx context.Context) {
	// A body read to its end after the deadline was set has had arm see
	// to the deadline already.
	if x, ok := ctx.(*requestContext); ok && !(x.armSees && x.body.read) {
		x.c.deadlineSet(x, true)
	}
}

// MarkStart records when the server began a front door request (its
// observer's clock read): the request timeout counts from it. Other
// contexts are left alone.
func MarkStart(ctx context.Context, start time.Time) {
	if x, ok := ctx.(*requestContext); ok {
		x.start = start
	}
}

// IsRequestBody reports whether body is a front door request's body,
// which ends at its Content-Length, already checked against the limit.
func IsRequestBody(body io.Reader) bool {
	_, ok := body.(*requestBody)
	return ok
}

func (x *requestContext) deadlineAt() time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.deadline
}

// deadlineSet starts the deadline's timer for x, the running request's
// context, unless something later will: the watch's timer, which starts
// it when it fires (a request still running after h1WatchDelay), or the
// end of the body (arm), when bodyDone is false and the body is unread.
func (c *clientConn) deadlineSet(x *requestContext, bodyDone bool) {
	dl := x.deadlineAt()
	if dl.IsZero() {
		return
	}
	c.wmu.Lock()
	later := c.wstate == watchArmed || (!bodyDone && !x.body.read)
	c.wmu.Unlock()
	if later && time.Until(dl) > h1WatchDelay {
		return
	}
	c.startDeadline(x)
}

// startDeadline arms the connection's deadline timer for x's deadline,
// or ends x at once when it has passed.
func (c *clientConn) startDeadline(x *requestContext) {
	dl := x.deadlineAt()
	if dl.IsZero() {
		return
	}
	rem := time.Until(dl)
	if rem <= 0 {
		x.cancel(context.DeadlineExceeded)
		return
	}
	c.wmu.Lock()
	c.dctx = x
	if c.dtimer == nil {
		c.dtimer = time.AfterFunc(rem, c.deadlineFired)
	} else {
		c.dtimer.Reset(rem)
	}
	c.wmu.Unlock()
}

// deadlineFired ends the request whose deadline the timer was armed for,
// if that deadline has passed (a callback that began as the timer was
// reset for the next request finds a later one and does nothing).
func (c *clientConn) deadlineFired() {
	c.wmu.Lock()
	x := c.dctx
	c.wmu.Unlock()
	if x == nil {
		return
	}
	if dl := x.deadlineAt(); !dl.IsZero() && !time.Now().Before(dl) {
		x.cancel(context.DeadlineExceeded)
	}
}

// stopDeadline disarms the deadline timer after a request.
func (c *clientConn) stopDeadline() {
	c.wmu.Lock()
	if c.dctx != nil {
		c.dtimer.Stop()
		c.dctx = nil
	}
	c.wmu.Unlock()
}
