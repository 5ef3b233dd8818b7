package kubedisco

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/prefixgate/prefixgate/backends"
)

// InferencePools is the InferencePool resource discovery reads.
var InferencePools = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// EngineKey is the pod label, or else annotation, that names a pool
// pod's engine: vllm, sglang or llamacpp (auto, or neither: detected from
// its metrics as for any backend).
const EngineKey = "prefixgate.io/engine"

// poolSource is inferencepool://NAMESPACE/NAME: the ready pods the pool's
// spec.selector matches, one backend per spec.targetPorts entry.
type poolSource struct {
	*watched
	ns, name string
	pools    cache.GenericNamespaceLister
	pods     cache.GenericNamespaceLister
}

func openPool(c *clients, spec, ns, name string, changed func()) *poolSource {
	s := &poolSource{watched: newWatched(spec), ns: ns, name: name}
	pi := informer(c.dynamic, InferencePools, ns, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	s.pools = lister(pi, InferencePools, ns)
	// Pods of the whole namespace: the pool's selector may change. Only
	// what discovery reads is kept of each.
	ki := informer(c.dynamic, pods, ns, func(*metav1.ListOptions) {})
	s.pods = lister(ki, pods, ns)
	s.watch(pi, dropManagedFields, changed)
	s.watch(ki, slimPod, changed)
	return s
}

// poolSpec is what discovery reads of an InferencePool.
type poolSpec struct {
	selector labels.Selector
	ports    []string
}

func (s *poolSource) spec() (*poolSpec, error) {
	obj, err := s.pools.Get(s.name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s: InferencePool %s/%s does not exist", s.watched.spec, s.ns, s.name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.watched.spec, err)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%s: unexpected object %T", s.watched.spec, obj)
	}
	bad := func(what string, err error) error {
		return fmt.Errorf("%s: InferencePool %s/%s: %s: %v", s.watched.spec, s.ns, s.name, what, err)
	}
	match, _, err := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	if err != nil || len(match) == 0 {
		return nil, bad("spec.selector.matchLabels", fmt.Errorf("missing or not a map of strings (%v)", err))
	}
	sel, err := labels.ValidatedSelectorFromSet(match)
	if err != nil {
		return nil, bad("spec.selector.matchLabels", err)
	}
	tps, _, err := unstructured.NestedSlice(u.Object, "spec", "targetPorts")
	if err != nil || len(tps) == 0 {
		return nil, bad("spec.targetPorts", fmt.Errorf("missing or empty (%v)", err))
	}
	ps := &poolSpec{selector: sel}
	for i, tp := range tps {
		m, _ := tp.(map[string]any)
		n, ok, _ := unstructured.NestedInt64(m, "number")
		if !ok || n < 1 || n > 65535 {
			return nil, bad(fmt.Sprintf("spec.targetPorts[%d].number", i), fmt.Errorf("%v is not 1..65535", m["number"]))
		}
		ps.ports = append(ps.ports, strconv.FormatInt(n, 10))
	}
	return ps, nil
}

// Discover lists podIP:port for every ready pod the pool selects and every
// target port, with the pod's engine as an ENGINE+ prefix when it names
// one.
func (s *poolSource) Discover(ctx context.Context) ([]string, error) {
	if err := s.waitSynced(ctx); err != nil {
		return nil, err
	}
	ps, err := s.spec()
	if err != nil {
		return nil, err
	}
	objs, err := s.pods.List(ps.selector)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.watched.spec, err)
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	if len(pods)*len(ps.ports) > MaxBackends {
		return nil, fmt.Errorf("%s: more than %d endpoints", s.watched.spec, MaxBackends)
	}
	var out []string
	for _, p := range pods {
		if !podReady(p) {
			continue
		}
		prefix, err := enginePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.watched.spec, err)
		}
		for _, port := range ps.ports {
			out = append(out, prefix+"http://"+net.JoinHostPort(p.Status.PodIP, port))
		}
	}
	return out, nil
}

// podReady: has an IP, is not being deleted, and its Ready condition is
// true.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// enginePrefix is "ENGINE+" from the pod's EngineKey label or annotation,
// or "" when it names none (or auto).
func enginePrefix(p *corev1.Pod) (string, error) {
	v, where := p.Labels[EngineKey], "label"
	if v == "" {
		v, where = p.Annotations[EngineKey], "annotation"
	}
	if v == "" {
		return "", nil
	}
	e, err := backends.ParseEngine(v)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: %s %s: %w", p.Namespace, p.Name, where, EngineKey, err)
	}
	if e == backends.EngineAuto {
		return "", nil
	}
	return e.String() + "+", nil
}

// pods is the core API's Pod resource, read through the dynamic client
// (typed clients would build every API group into the binary).
var pods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// slimPod keeps of a pod only what discovery reads, as a typed Pod.
func slimPod(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone
	}
	p := new(corev1.Pod)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: corev1.PodStatus{PodIP: p.Status.PodIP},
	}
	if v, ok := p.Annotations[EngineKey]; ok {
		out.Annotations = map[string]string{EngineKey: v}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}
