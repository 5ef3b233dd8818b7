package server

import (
	"container/list"
	"sync"
)

// maxStickyKeyBytes bounds a key a stickyTable keeps: a response id or a
// session header longer than this is not remembered.
const maxStickyKeyBytes = 256

// stickyTable remembers which backend holds a key (a stored response's
// id, a session), least recently used evicted first past max entries, so
// that what answers and headers put in it stays bounded.
type stickyTable struct {
	mu    sync.Mutex
	max   int
	byKey map[string]*list.Element
	order list.List // front: most recently used; values are *stickyEntry
}

type stickyEntry struct{ key, backend string }

func newStickyTable(max int) *stickyTable {
	t := &stickyTable{max: max, byKey: make(map[string]*list.Element)}
	t.order.Init()
	return t
}

// put remembers that backend holds key.
func (t *stickyTable) put(key, backend string) {
	if t.max <= 0 || key == "" || len(key) > maxStickyKeyBytes {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byKey[key]; ok {
		e.Value.(*stickyEntry).backend = backend
		t.order.MoveToFront(e)
		return
	}
	for t.order.Len() >= t.max {
		oldest := t.order.Back()
		delete(t.byKey, oldest.Value.(*stickyEntry).key)
		t.order.Remove(oldest)
	}
	t.byKey[key] = t.order.PushFront(&stickyEntry{key: key, backend: backend})
}

// get is the backend that holds key, if the table knows it.
func (t *stickyTable) get(key string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byKey[key]
	if !ok {
		return "", false
	}
	t.order.MoveToFront(e)
	return e.Value.(*stickyEntry).backend, true
}

// len is how many keys the table holds.
func (t *stickyTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.order.Len()
}
