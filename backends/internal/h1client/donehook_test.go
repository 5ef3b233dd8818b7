package h1client

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/prefixgate/prefixgate/backends/donehook"
)

// hookCounter is a donehook.Context that counts its hooks.
type hookCounter struct {
	context.Context
	mu             sync.Mutex
	added, removed int
}

func (h *hookCounter) AddDoneHook(func()) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.added++
	return uint64(h.added)
}

func (h *hookCounter) RemoveDoneHook(uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removed++
	return true
}

var _ donehook.Context = (*hookCounter)(nil)

// TestH1UsesTheDoneHookContract: a request whose context implements
// donehook.Context has its connection's expiry registered there, once,
// and removed once the answer is read, with no context.AfterFunc.
func TestH1UsesTheDoneHookContract(t *testing.T) {
	srv, _ := echoServer(t, nil)
	p, b := newTestPool(t, srv.URL, Options{})
	ctx := &hookCounter{Context: context.Background()}
	resp, err := p.Forward(ctx, b, http.MethodPost, "/", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if ctx.added != 1 || ctx.removed != 1 {
		t.Fatalf("hooks added %d, removed %d: want 1 and 1", ctx.added, ctx.removed)
	}
}
