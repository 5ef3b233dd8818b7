package kubedisco

import (
	"context"
	"fmt"
	"net"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// sliceSource is k8s://NAMESPACE/SERVICE:PORT: the ready endpoints of the
// Service's EndpointSlices (label kubernetes.io/service-name), at the
// port of that name or number.
type sliceSource struct {
	*watched
	ns, port string
	lister   cache.GenericNamespaceLister
}

// endpointSlices is the discovery API's EndpointSlice resource, read
// through the dynamic client.
var endpointSlices = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}

// typedSlice turns a listed EndpointSlice into its typed form without
// managedFields.
func typedSlice(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone
	}
	es := new(discoveryv1.EndpointSlice)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, es); err != nil {
		return nil, fmt.Errorf("EndpointSlice %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	es.ManagedFields = nil
	return es, nil
}

func openSlices(c *clients, spec, ns, svc, port string, changed func()) *sliceSource {
	inf := informer(c.dynamic, endpointSlices, ns, func(o *metav1.ListOptions) {
		o.LabelSelector = discoveryv1.LabelServiceName + "=" + svc
	})
	s := &sliceSource{watched: newWatched(spec), ns: ns, port: port, lister: lister(inf, endpointSlices, ns)}
	s.watch(inf, typedSlice, changed)
	return s
}

// Discover lists the ready, not terminating endpoints that serve the port.
func (s *sliceSource) Discover(ctx context.Context) ([]string, error) {
	if err := s.waitSynced(ctx); err != nil {
		return nil, err
	}
	list, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.spec, err)
	}
	var out []string
	for _, o := range list {
		es, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		port, ok := s.portOf(es)
		if !ok {
			continue
		}
		for _, ep := range es.Endpoints {
			if !endpointReady(ep) || len(ep.Addresses) == 0 {
				continue
			}
			// Consumers use the first address (the API's rule).
			out = append(out, "http://"+net.JoinHostPort(ep.Addresses[0], port))
		}
		if len(out) > MaxBackends {
			return nil, fmt.Errorf("%s: more than %d endpoints", s.spec, MaxBackends)
		}
	}
	return out, nil
}

// portOf finds the source's port among the slice's: by name, or by number.
func (s *sliceSource) portOf(es *discoveryv1.EndpointSlice) (string, bool) {
	for _, p := range es.Ports {
		if p.Port == nil {
			continue
		}
		num := strconv.Itoa(int(*p.Port))
		if (p.Name != nil && *p.Name == s.port) || num == s.port {
			return num, true
		}
	}
	return "", false
}

// endpointReady: ready (unset counts as ready, as the API says) and not
// terminating.
func endpointReady(ep discoveryv1.Endpoint) bool {
	c := ep.Conditions
	if c.Terminating != nil && *c.Terminating {
		return false
	}
	return c.Ready == nil || *c.Ready
}
