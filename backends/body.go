package backends

import (
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// ErrIdleTimeout is returned by a body read that waited longer than the idle
// timeout for a byte.
var ErrIdleTimeout = errors.New("backend stream idle for longer than the idle timeout")

// NewIdleTimeoutReader wraps a response body so that a Read which waits
// more than d for data fails with ErrIdleTimeout and closes rc, for
// server-sent event streams whose backend stalls. Only time spent inside
// Read counts: a slow consumer does not trip it. d <= 0 disables the limit.
// Close may be called from another goroutine.
func NewIdleTimeoutReader(rc io.ReadCloser, d time.Duration) io.ReadCloser {
	return newTrackedBody(rc, d, nil, nil)
}

// trackedBody is a forwarded response body: it enforces the idle timeout
// and keeps the backend's in-flight count until EOF or Close.
type trackedBody struct {
	rc       io.ReadCloser
	idle     time.Duration
	timer    *time.Timer
	b        *Backend // nil for NewIdleTimeoutReader
	p        *Pool
	timedOut atomic.Bool
	done     atomic.Bool
}

func newTrackedBody(rc io.ReadCloser, idle time.Duration, b *Backend, p *Pool) io.ReadCloser {
	t := &trackedBody{rc: rc, idle: idle, b: b, p: p}
	if idle > 0 {
		t.timer = time.AfterFunc(time.Hour, t.expire)
		t.timer.Stop()
	}
	return t
}

func (t *trackedBody) expire() {
	t.timedOut.Store(true)
	// Closing unblocks the Read in progress.
	t.rc.Close()
}

func (t *trackedBody) Read(p []byte) (int, error) {
	if t.timer == nil {
		n, err := t.rc.Read(p)
		if err != nil {
			t.finish()
		}
		return n, err
	}
	if t.timedOut.Load() {
		return 0, ErrIdleTimeout
	}
	t.timer.Reset(t.idle)
	n, err := t.rc.Read(p)
	fired := !t.timer.Stop() && t.timedOut.Load()
	if fired && err != nil {
		if t.b != nil && err != io.EOF {
			t.p.ReportFailure(t.b)
		}
		t.finish()
		return n, ErrIdleTimeout
	}
	if err != nil {
		t.finish()
	}
	return n, err
}

func (t *trackedBody) Close() error {
	if t.timer != nil {
		t.timer.Stop()
	}
	t.finish()
	return t.rc.Close()
}

// finish releases the in-flight count once.
func (t *trackedBody) finish() {
	if t.b != nil && t.done.CompareAndSwap(false, true) {
		t.b.inflight.Add(-1)
	}
}
