package helmchart_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/prefixgate/prefixgate/backends"
	helmchart "github.com/prefixgate/prefixgate/deploy/helm"
	"github.com/prefixgate/prefixgate/internal/kubedisco"
)

// The model server the test declares in each namespace: an address from
// the documentation range (RFC 5737). Nothing connects to it; discovery
// only reads it from the API.
const (
	replicaIP   = "192.0.2.10"
	replicaPort = 8000
)

// checkDiscoveryAsServiceAccount declares one ready model server (an
// EndpointSlice of the Service vllm, and a ready Pod labelled app: vllm),
// then opens every Kubernetes backend of the rendered configuration with
// prefixgate's discovery, authenticated as the chart's ServiceAccount: the
// chart's RBAC must let it find the replica.
func checkDiscoveryAsServiceAccount(t *testing.T, ctx context.Context, admin *rest.Config, ns, sa string, ms []helmchart.Manifest) {
	t.Helper()
	declareReplica(t, ctx, kubernetes.NewForConfigOrDie(admin), ns, sa)
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	open := kubedisco.Opener(kubedisco.Config{REST: cfg})
	want := "http://" + net.JoinHostPort(replicaIP, strconv.Itoa(replicaPort))
	for _, spec := range kubernetesBackends(t, ms) {
		d, err := open(spec, func() {})
		if err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		got, err := d.Discover(dctx)
		cancel()
		if c, ok := d.(interface{ Close() error }); ok {
			_ = c.Close()
		}
		if err != nil || !slices.Equal(got, []string{want}) {
			t.Errorf("as %s, %s discovers %q (%v), want [%s]", sa, spec, got, err, want)
		}
	}
}

// kubernetesBackends are the k8s:// and inferencepool:// backends of the
// rendered configuration file.
func kubernetesBackends(t *testing.T, ms []helmchart.Manifest) []string {
	t.Helper()
	var out []string
	for _, m := range ms {
		if m.Kind != "ConfigMap" {
			continue
		}
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(m.YAML), &cm); err != nil {
			t.Fatal(err)
		}
		var file struct {
			Backends []string `json:"backends"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["prefixgate.yaml"]), &file); err != nil {
			t.Fatal(err)
		}
		for _, b := range file.Backends {
			_, rest, err := backends.SplitEngine(b)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(rest, "k8s://") || strings.HasPrefix(rest, "inferencepool://") {
				out = append(out, rest)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("a profile with RBAC has no k8s:// or inferencepool:// backend")
	}
	return out
}

// declareReplica writes what the control plane would for one ready vLLM
// pod: its Pod with a ready status, and its Service's EndpointSlice.
func declareReplica(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, sa string) {
	t.Helper()
	noToken := false
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vllm-0", Labels: map[string]string{"app": "vllm"}},
		// The chart's ServiceAccount: no controller makes a namespace's
		// default one on this control plane.
		Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: &noToken,
			Containers: []corev1.Container{{Name: "vllm", Image: "vllm"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: replicaIP, PodIPs: []corev1.PodIP{{IP: replicaIP}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	name, port, ready := "http", int32(replicaPort), true
	_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "vllm-1", Labels: map[string]string{discoveryv1.LabelServiceName: "vllm"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{replicaIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
