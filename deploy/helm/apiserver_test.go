package helmchart_test

import (
	"context"
	_ "embed"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	helmchart "github.com/prefixgate/prefixgate/deploy/helm"
	"github.com/prefixgate/prefixgate/internal/kubedisco"
	"github.com/prefixgate/prefixgate/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// serviceMonitorCRD declares prometheus-operator's ServiceMonitor kind to
// the test's API server. Its schema keeps the spec as it is: the fields
// are checked by the strict decode into prometheus-operator's Go types
// (TestProfilesRenderAndDecodeStrictly); the server checks the rest.
//
//go:embed testdata/servicemonitor-crd.yaml
var serviceMonitorCRD []byte

// TestProfilesCreateOnAPIServer renders every profile into a namespace of
// its own and creates every object on a real kube-apiserver with strict
// field validation (an unknown or duplicated field fails the create), then
// checks as the chart's ServiceAccount that its RBAC grants what
// discovery reads and nothing more.
func TestProfilesCreateOnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kube-apiserver")
	}
	srv := kubetest.Shared(t)
	cfg := srv.Config()
	ctx := context.Background()
	createObject(t, ctx, cfg, "", serviceMonitorCRD)
	waitServed(t, ctx, cfg, schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"})
	names := make([]string, 0, len(profiles))
	for name := range profiles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ns := "chart-" + name
			cs := kubernetes.NewForConfigOrDie(cfg)
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			ms, err := helmchart.Render(chartDir, release, ns, chartDir+"/profiles/"+name+".yaml")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				createObject(t, ctx, cfg, ns, []byte(m.YAML))
			}
			if slices.Contains(profiles[name], "Role") {
				sa := release + "-prefixgate"
				checkServiceAccountAccess(t, ctx, cfg, ns, sa)
				checkDiscoveryAsServiceAccount(t, ctx, cfg, ns, sa, ms)
			}
		})
	}
}

// createObject creates one YAML object with strict field validation.
func createObject(t *testing.T, ctx context.Context, cfg *rest.Config, ns string, doc []byte) {
	t.Helper()
	var obj map[string]any
	if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	dc := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(cfg).Discovery()))
	gvk := u.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s %s: %v", gvk.Kind, u.GetName(), err)
	}
	var ri dynamic.ResourceInterface = dc.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		ri = dc.Resource(mapping.Resource).Namespace(ns)
	}
	if _, err := ri.Create(ctx, u, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
		t.Fatalf("create %s %s: %v", gvk.Kind, u.GetName(), err)
	}
}

// waitServed waits until the API server serves a new resource.
func waitServed(t *testing.T, ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource) {
	t.Helper()
	dc := dynamic.NewForConfigOrDie(cfg)
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err = dc.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			return
		}
	}
	t.Fatalf("%s is not served: %v", gvr, err)
}

// checkServiceAccountAccess acts as the chart's ServiceAccount: it lists
// each resource discovery reads in its namespace, may watch them, and may
// not read them elsewhere, write them or read Secrets.
func checkServiceAccountAccess(t *testing.T, ctx context.Context, admin *rest.Config, ns, sa string) {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	dc := dynamic.NewForConfigOrDie(cfg)
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, gvr := range discoveryResources(t, admin) {
		if _, err := dc.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("as %s: list %s in %s: %v", sa, gvr.Resource, ns, err)
		}
		if _, err := dc.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("as %s: list %s in another namespace: %v, want forbidden", sa, gvr.Resource, err)
		}
		allowed(t, ctx, cs, ns, "watch", gvr, true)
		allowed(t, ctx, cs, ns, "get", gvr, false)
		allowed(t, ctx, cs, ns, "update", gvr, false)
	}
	allowed(t, ctx, cs, ns, "list", schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, false)
}

func allowed(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, verb string, gvr schema.GroupVersionResource, want bool) {
	t.Helper()
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: gvr.Group, Resource: gvr.Resource,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.Allowed != want {
		t.Errorf("%s %s in %s: allowed %v, want %v (%s)", verb, strings.TrimPrefix(gvr.GroupResource().String(), "."), ns, r.Status.Allowed, want, r.Status.Reason)
	}
}

// discoveryResources are the resources of discovery's RBAC rules
// (kubedisco.Rules), with the versions the server serves them at.
func discoveryResources(t *testing.T, cfg *rest.Config) []schema.GroupVersionResource {
	t.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(cfg).Discovery()))
	var out []schema.GroupVersionResource
	for _, rule := range kubedisco.Rules() {
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Group: g, Resource: r})
				if err != nil {
					t.Fatalf("%s.%s: %v", r, g, err)
				}
				out = append(out, gvr)
			}
		}
	}
	return out
}
