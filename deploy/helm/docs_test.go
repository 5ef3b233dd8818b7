package helmchart_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// yamlBlock is a fenced YAML block of a Markdown file.
var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestDocsHTTPRoutesReachTheChart decodes every HTTPRoute of
// docs/kubernetes.md strictly into Gateway API's Go type and checks that
// its backendRefs name what the chart renders for the release the docs
// install (pg in inference): the serve Service and its port, or the epp
// InferencePool.
func TestDocsHTTPRoutesReachTheChart(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := gatewayv1.Install(s); err != nil {
		t.Fatal(err)
	}
	dec := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, s, s, kjson.SerializerOptions{Yaml: true, Strict: true})
	serve := renderNames(t, "serve-default")
	epp := renderNames(t, "epp")
	routes := 0
	for _, m := range yamlBlock.FindAllStringSubmatch(string(doc), -1) {
		if !strings.Contains(m[1], "kind: HTTPRoute") {
			continue
		}
		obj, _, err := dec.Decode([]byte(m[1]), nil, nil)
		if err != nil {
			t.Fatalf("docs/kubernetes.md HTTPRoute:\n%s\n%v", m[1], err)
		}
		route := obj.(*gatewayv1.HTTPRoute)
		routes++
		if route.Namespace != namespace {
			t.Errorf("HTTPRoute %s is in %q, not the release's namespace %s", route.Name, route.Namespace, namespace)
		}
		for _, rule := range route.Spec.Rules {
			for _, ref := range rule.BackendRefs {
				kind, group := "Service", ""
				if ref.Kind != nil {
					kind = string(*ref.Kind)
				}
				if ref.Group != nil {
					group = string(*ref.Group)
				}
				port := int32(0)
				if ref.Port != nil {
					port = int32(*ref.Port)
				}
				got := group + "/" + kind + "/" + string(ref.Name)
				var ok bool
				switch kind {
				case "Service":
					want, found := serve[got]
					ok = found && port == want
				case "InferencePool":
					_, ok = epp[got]
				}
				if !ok {
					t.Errorf("HTTPRoute %s: backendRef %s port %d is not an object the chart renders (serve: %v, epp: %v)", route.Name, got, port, serve, epp)
				}
			}
		}
	}
	if routes != 2 {
		t.Errorf("docs/kubernetes.md has %d HTTPRoutes, want 2 (serve and epp)", routes)
	}
}

// renderNames is group/kind/name of each Service (with its port) and
// InferencePool a profile renders.
func renderNames(t *testing.T, profile string) map[string]int32 {
	t.Helper()
	r := renderProfile(t, profile)
	out := map[string]int32{}
	for _, m := range r.manifests {
		switch m.Kind {
		case "Service":
			out["/Service/"+m.Name] = r.svc.Spec.Ports[0].Port
		case "InferencePool":
			out[strings.Split(m.APIVersion, "/")[0]+"/InferencePool/"+m.Name] = 0
		}
	}
	return out
}
