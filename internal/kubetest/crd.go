package kubetest

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// InferencePoolCRD is the InferencePool CRD the server is started with
// (inference.networking.k8s.io/v1, in YAML).
//
//go:embed inferencepool-crd.yaml
var InferencePoolCRD []byte

// InferencePools is the InferencePool resource.
var InferencePools = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// applyCRDs creates the InferencePool CRD and waits until it is served.
func (s *Server) applyCRDs(ctx context.Context) error {
	var obj map[string]any
	if err := yaml.UnmarshalStrict(InferencePoolCRD, &obj); err != nil {
		return fmt.Errorf("kubetest: inferencepool-crd.yaml: %w", err)
	}
	dc, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := dc.Resource(crds).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: creating the InferencePool CRD: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := dc.Resource(crds).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err == nil && established(got) {
			// Established is set before discovery serves the resource.
			if _, err = dc.Resource(InferencePools).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubetest: the InferencePool CRD is not served after a minute: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
