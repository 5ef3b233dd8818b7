package kubetest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/prefixgate/prefixgate/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

func pool(name string, ports ...int64) *unstructured.Unstructured {
	tp := make([]any, len(ports))
	for i, p := range ports {
		tp[i] = map[string]any{"number": p}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": map[string]any{"app": "vllm"}},
			"targetPorts":       tp,
			"endpointPickerRef": map[string]any{"name": "prefixgate", "port": map[string]any{"number": int64(9002)}},
		},
	}}
}

// TestInferencePoolCRD: the API server serves InferencePools, validates
// them against the CRD's schema, and keeps them across a restart of
// kube-apiserver on the same etcd.
func TestInferencePoolCRD(t *testing.T) {
	s := kubetest.Shared(t)
	ctx := context.Background()
	dc, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	pools := dc.Resource(kubetest.InferencePools).Namespace("default")
	got, err := pools.Create(ctx, pool("crd-ok", 8000), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fm, _, _ := unstructured.NestedString(got.Object, "spec", "endpointPickerRef", "failureMode"); fm != "FailClose" {
		t.Errorf("failureMode defaulted to %q, want FailClose", fm)
	}
	for name, bad := range map[string]*unstructured.Unstructured{
		"duplicate-ports": pool("crd-dup", 8000, 8000),
		"no-ports":        pool("crd-none"),
		"port-zero":       pool("crd-zero", 0),
	} {
		_, err := pools.Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: created or failed otherwise: %v", name, err)
		}
	}

	s.StopAPIServer()
	if _, err := pools.Get(ctx, "crd-ok", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server answered after StopAPIServer")
	}
	if err := s.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := pools.Get(ctx, "crd-ok", metav1.GetOptions{}); err != nil {
		t.Fatalf("after a restart on the same etcd: %v", err)
	}
}

// TestRBAC: a token without a role is refused; the admin token is not.
func TestRBAC(t *testing.T) {
	s := kubetest.Shared(t)
	ctx := context.Background()
	anon := kubernetes.NewForConfigOrDie(s.ConfigFor("not-a-token"))
	_, err := anon.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("an unknown token listed pods: %v", err)
	}
	admin := kubernetes.NewForConfigOrDie(s.Config())
	if _, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("admin: %v", err)
	}
	if !strings.HasPrefix(s.Host(), "https://127.0.0.1:") {
		t.Errorf("Host %q is not a loopback HTTPS URL", s.Host())
	}
}
