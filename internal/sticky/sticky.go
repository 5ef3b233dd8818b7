// Package sticky holds the bounded tables that keep a request on the
// backend that holds its state: a stored Responses id on the replica that
// produced it, a session on the replica it started on. The HTTP server and
// the endpoint picker share them, so both front doors follow the same ids
// with the same bound.
package sticky

import (
	"container/list"
	"sync"
)

// MaxKeyBytes bounds a key a Table keeps: a response id or a
// session header longer than this is not remembered.
const MaxKeyBytes = 256

// MaxTenantBytes bounds a tenant name (pipeline.Config validates it), so
// that TenantKey of any key within MaxKeyBytes is kept.
const MaxTenantBytes = 256

// Table remembers which backend holds a key (a stored response's
// id, a session), least recently used evicted first past max entries, so
// that what answers and headers put in it stays bounded.
type Table struct {
	mu    sync.Mutex
	max   int
	byKey map[string]*list.Element
	order list.List // front: most recently used; values are *entry
}

type entry struct{ key, backend string }

// New returns a table of at most max keys; max <= 0 keeps none.
func New(max int) *Table {
	t := &Table{max: max, byKey: make(map[string]*list.Element)}
	t.order.Init()
	return t
}

// Put remembers that backend holds key.
func (t *Table) Put(key, backend string) {
	if t.max <= 0 || key == "" || len(key) > MaxTenantBytes+1+MaxKeyBytes {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byKey[key]; ok {
		e.Value.(*entry).backend = backend
		t.order.MoveToFront(e)
		return
	}
	for t.order.Len() >= t.max {
		oldest := t.order.Back()
		delete(t.byKey, oldest.Value.(*entry).key)
		t.order.Remove(oldest)
	}
	t.byKey[key] = t.order.PushFront(&entry{key: key, backend: backend})
}

// Get is the backend that holds key, if the table knows it.
func (t *Table) Get(key string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byKey[key]
	if !ok {
		return "", false
	}
	t.order.MoveToFront(e)
	return e.Value.(*entry).backend, true
}

// Len is how many keys the table holds.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.order.Len()
}

// TenantKey scopes a response id or a session to its tenant: one tenant
// never reaches another's stored responses or sessions.
func TenantKey(tenant, key string) string {
	if tenant == "" {
		return key
	}
	return tenant + "\x00" + key
}
