package h1client

import (
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// ErrIdleTimeout is returned by a body read that waited longer than the idle
// timeout for a byte (backends.ErrIdleTimeout).
var ErrIdleTimeout = errors.New("backend stream idle for longer than the idle timeout")

// IdleBody is a forwarded response body under the idle timeout: a Read
// that waits more than idle for data fails with ErrIdleTimeout and closes
// the body, for server-sent event streams whose backend stalls; the stall
// counts as a failure of its backend when the error reaches Observe. Only
// time spent inside Read counts: a slow consumer does not trip it. Close
// may be called from another goroutine. In-flight counts are the router's
// (the caller's Decision), not the body's.
type IdleBody struct {
	rc   io.ReadCloser
	idle time.Duration
	// ready, when rc has it, tells that rc's next Read returns without
	// waiting (its bytes are buffered): such a Read needs no timer. A
	// plain answer usually arrives with its header, so most bodies never
	// make theirs.
	ready    *responseBody
	timer    atomic.Pointer[time.Timer] // made by the first Read that may wait
	timedOut atomic.Bool
}

// NewIdleBody puts rc, any forwarded response body, under the idle
// timeout. It lives here, with the fast path, because the fast path's
// answer is allocated with room for it.
func NewIdleBody(rc io.ReadCloser, idle time.Duration) io.ReadCloser {
	var t *IdleBody
	if hb, ok := rc.(*responseBody); ok && hb.answer != nil {
		t = &hb.answer.idle // allocated with the response
	} else {
		t = new(IdleBody)
	}
	t.rc, t.idle = rc, idle
	t.ready, _ = rc.(*responseBody)
	return t
}

func (t *IdleBody) expire() {
	t.timedOut.Store(true)
	// Closing unblocks the Read in progress.
	t.rc.Close()
}

func (t *IdleBody) Read(p []byte) (int, error) {
	if t.timedOut.Load() {
		return 0, ErrIdleTimeout
	}
	if t.ready != nil && t.ready.readyNow() {
		return t.rc.Read(p)
	}
	tm := t.timer.Load()
	if tm == nil {
		tm = time.AfterFunc(t.idle, t.expire)
		t.timer.Store(tm)
	} else {
		tm.Reset(t.idle)
	}
	n, err := t.rc.Read(p)
	fired := !tm.Stop() && t.timedOut.Load()
	if fired && err != nil && err != io.EOF {
		// The timer closed the body under the Read; a body that ended
		// anyway ended well.
		return n, ErrIdleTimeout
	}
	return n, err
}

func (t *IdleBody) Close() error {
	if tm := t.timer.Load(); tm != nil {
		tm.Stop()
	}
	return t.rc.Close()
}
