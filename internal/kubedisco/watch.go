package kubedisco

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// watched is what every source shares: its informers' sync state and the
// channel that stops them.
type watched struct {
	spec   string
	synced []cache.InformerSynced
	stop   chan struct{}
	once   sync.Once

	lastErr atomic.Pointer[error] // the informers' last list or watch error
}

// informer watches the objects of resource gvr in namespace ns through the
// dynamic client (typed clients and informer factories would build every
// API group into the binary); tweak narrows the list and watch. The
// transform given to watch turns the objects into what the source reads.
func informer(c dynamic.Interface, gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	ri := c.Resource(gvr).Namespace(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return ri.Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: gvr.String(),
	})
}

// lister reads inf's cache of namespace ns.
func lister(inf cache.SharedIndexInformer, gvr schema.GroupVersionResource, ns string) cache.GenericNamespaceLister {
	return cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource()).ByNamespace(ns)
}

// watch registers inf's sync state and error with w, and calls changed on
// each of its events.
func (w *watched) watch(inf cache.SharedIndexInformer, transform cache.TransformFunc, changed func()) {
	_ = inf.SetTransform(transform)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.lastErr.Store(&err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	_, _ = inf.AddEventHandler(onChange(changed))
	w.synced = append(w.synced, inf.HasSynced)
	go inf.Run(w.stop)
}

func newWatched(spec string) *watched { return &watched{spec: spec, stop: make(chan struct{})} }

func (w *watched) String() string { return w.spec }

// Close stops the source's informers.
func (w *watched) Close() error {
	w.once.Do(func() { close(w.stop) })
	return nil
}

// waitSynced waits until every informer has listed once, ctx ends or the
// source is closed.
func (w *watched) waitSynced(ctx context.Context) error {
	all := true
	for _, s := range w.synced {
		all = all && s()
	}
	if all {
		return nil
	}
	stop, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-w.stop:
		case <-done:
			return
		}
		close(stop)
	}()
	if !cache.WaitForCacheSync(stop, w.synced...) {
		select {
		case <-w.stop:
			return fmt.Errorf("%s: source closed", w.spec)
		default:
		}
		if e := w.lastErr.Load(); e != nil {
			return fmt.Errorf("%s: the API server has not answered a list yet: %w", w.spec, *e)
		}
		return fmt.Errorf("%s: the API server has not answered a list yet: %w", w.spec, ctx.Err())
	}
	return nil
}

// onChange is an event handler that calls changed on every add, update
// and delete.
func onChange(changed func()) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}
}

// dropManagedFields keeps informers' caches small: discovery never reads
// managedFields.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
