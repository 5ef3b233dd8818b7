package backends_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends"
)

// pushSource is a watching source: the test sets its answer and calls
// changed, as an informer does.
type pushSource struct {
	mu      sync.Mutex
	addrs   []string
	changed func()
	closed  bool
}

func (p *pushSource) set(addrs ...string) {
	p.mu.Lock()
	p.addrs = addrs
	p.mu.Unlock()
	p.changed()
}

func (p *pushSource) Discover(context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.addrs), nil
}

func (p *pushSource) String() string { return "push://" }

func (p *pushSource) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}

// TestOpenedSource: Options.Open opens schemes the pool does not know; a
// change the source reports applies at once (DiscoveryInterval is an
// hour here), a discovered ENGINE+ prefix sets the backend's engine, the
// same spec is not opened twice, and a dropped source is closed.
func TestOpenedSource(t *testing.T) {
	var opened []*pushSource
	var openedMu sync.Mutex
	open := func(spec string, changed func()) (backends.Discovery, error) {
		if !strings.HasPrefix(spec, "push://") {
			return nil, errors.New("not push")
		}
		p := &pushSource{addrs: []string{"10.0.0.1:80"}, changed: changed}
		openedMu.Lock()
		opened = append(opened, p)
		openedMu.Unlock()
		return p, nil
	}
	pool, err := backends.NewPool([]string{"push://a"}, backends.Options{Open: open, DiscoveryInterval: time.Hour, ProbeInterval: time.Hour, ScrapeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pool.Run(ctx)

	opened[0].set("10.0.0.1:80", "sglang+http://10.0.0.2:80")
	for deadline := time.Now().Add(10 * time.Second); len(pool.Backends()) != 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the change did not apply: %d backends", len(pool.Backends()))
		}
	}
	if b, _ := pool.Get("10.0.0.2:80"); b == nil || b.Engine() != backends.EngineSGLang {
		t.Errorf("a discovered sglang+ prefix: backend %+v", b)
	}
	if err := pool.SetBackends([]string{"push://a", "10.0.0.9:80"}); err != nil {
		t.Fatal(err)
	}
	if len(opened) != 1 {
		t.Errorf("the same spec was opened %d times", len(opened))
	}
	if err := pool.SetBackends([]string{"10.0.0.9:80"}); err != nil {
		t.Fatal(err)
	}
	if !opened[0].closed {
		t.Error("the dropped source was not closed")
	}
	if _, err := backends.NewPool([]string{"nope://x"}, backends.Options{Open: open}); err == nil || !strings.Contains(err.Error(), "not push") {
		t.Errorf("Open's error: %v", err)
	}
	if _, err := backends.NewPool([]string{"push://x"}, backends.Options{}); err == nil {
		t.Error("an unknown scheme without Open was accepted")
	}
}
