package backends

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

// lateTimerContext has a deadline that has passed but whose Err has not
// yet said so: the moment between a transport failing at the deadline and
// the context's own timer firing. Its Done is the embedded context's, which
// the test closes to make the transport give up.
type lateTimerContext struct {
	context.Context
	deadline time.Time
}

func (c lateTimerContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c lateTimerContext) Err() error                  { return nil }

// TestForwardFailingAtTheDeadlineIsATimeout: a request whose transport
// gives up at its deadline, before the context reports it, timed out; it
// is not an unreachable backend (which would be retried elsewhere and
// answered 502, and count against the backend).
func TestForwardFailingAtTheDeadlineIsATimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // accepts nothing: the request waits for its answer
	for _, fast := range []bool{true, false} {
		p, b := newTestPool(t, "http://"+ln.Addr().String(), Options{})
		if !fast {
			p.transport = http.DefaultTransport.(*http.Transport).Clone()
		}
		inner, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(20*time.Millisecond, cancel)
		ctx := lateTimerContext{Context: inner, deadline: time.Now().Add(-time.Millisecond)}
		_, err := p.Forward(ctx, b, http.MethodPost, "/v1/chat/completions", []byte(`{}`), nil)
		stop.Stop()
		cancel()
		var ue *UnreachableError
		if errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("fast path %v: error %v; want the deadline, not an unreachable backend", fast, err)
		}
	}
}
