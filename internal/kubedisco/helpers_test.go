package kubedisco_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/kubedisco"
	"github.com/prefixgate/prefixgate/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

var nsSeq atomic.Int64

// cluster is the shared API server with a fresh namespace for one test.
type cluster struct {
	t   testing.TB
	srv *kubetest.Server
	cs  kubernetes.Interface
	dyn dynamic.Interface
	ns  string
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	srv := kubetest.Shared(t)
	c := &cluster{t: t, srv: srv, cs: kubernetes.NewForConfigOrDie(srv.Config()), dyn: dynamic.NewForConfigOrDie(srv.Config())}
	c.ns = fmt.Sprintf("disco-%d-%d", os.Getpid()%10000, nsSeq.Add(1))
	_, err := c.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// slice writes (creates or replaces) the EndpointSlice name of service svc
// with one endpoint per address, all on port (named "http").
func (c *cluster) slice(name, svc string, port int32, eps ...discoveryv1.Endpoint) {
	c.t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(port)}},
	}
	api := c.cs.DiscoveryV1().EndpointSlices(c.ns)
	ctx := context.Background()
	old, err := api.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		es.ResourceVersion = old.ResourceVersion
		_, err = api.Update(ctx, es, metav1.UpdateOptions{})
	} else {
		_, err = api.Create(ctx, es, metav1.CreateOptions{})
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) deleteSlice(name string) {
	c.t.Helper()
	if err := c.cs.DiscoveryV1().EndpointSlices(c.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// endpoint is one address with its conditions.
func endpoint(addr string, ready, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: new(ready), Serving: new(ready || terminating), Terminating: new(terminating)}}
}

// inferencePool creates an InferencePool selecting app=APP on ports.
func (c *cluster) inferencePool(name, app string, ports ...int64) {
	c.t.Helper()
	tp := make([]any, len(ports))
	for i, p := range ports {
		tp[i] = map[string]any{"number": p}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": map[string]any{"app": app}},
			"targetPorts":       tp,
			"endpointPickerRef": map[string]any{"name": "prefixgate-epp", "port": map[string]any{"number": int64(9002)}},
		},
	}}
	if _, err := c.dyn.Resource(kubedisco.InferencePools).Namespace(c.ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// pod creates a pod (bound to a node, as a scheduled pod is) with labels
// and sets its status: IP and Ready.
func (c *cluster) pod(name, ip string, ready bool, labels map[string]string) {
	c.t.Helper()
	ctx := context.Background()
	api := c.cs.CoreV1().Pods(c.ns)
	p, err := api.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.podStatus(p, ip, ready)
}

func (c *cluster) podStatus(p *corev1.Pod, ip string, ready bool) {
	c.t.Helper()
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}
	if _, err := c.cs.CoreV1().Pods(c.ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) setPodReady(name string, ready bool) {
	c.t.Helper()
	p, err := c.cs.CoreV1().Pods(c.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.podStatus(p, p.Status.PodIP, ready)
}

// open opens spec with cfg and closes it at the test's end; changes counts
// the source's change calls.
func open(t testing.TB, cfg kubedisco.Config, spec string, changes *atomic.Int64) backends.Discovery {
	t.Helper()
	d, err := kubedisco.Opener(cfg)(spec, func() { changes.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.(interface{ Close() error }).Close() })
	return d
}

// eventually polls d until it answers want (sorted), for up to 20 s; it
// bounds the wait, it does not assert a speed.
func eventually(t testing.TB, d backends.Discovery, want ...string) {
	t.Helper()
	slices.Sort(want)
	var got []string
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err = d.Discover(ctx)
		cancel()
		slices.Sort(got)
		if err == nil && slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("%s: got %q (err %v), want %q", d, got, err, want)
}

func port(p int) string { return strconv.Itoa(p) }
