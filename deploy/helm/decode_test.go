package helmchart_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/prefixgate/prefixgate/backends"
	helmchart "github.com/prefixgate/prefixgate/deploy/helm"
	"github.com/prefixgate/prefixgate/internal/config"
)

// scheme knows every built-in kind and prometheus-operator's.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// strict decodes YAML into the registered Go type, failing on an unknown
// or duplicated field, as kubectl's strict field validation does.
var strict = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true})

// inferencePool is inference.networking.k8s.io/v1's InferencePool as far
// as the chart writes it, field for field (the API server checks it
// against the CRD's schema too).
type inferencePool struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		TargetPorts []struct {
			Number int32 `json:"number"`
		} `json:"targetPorts"`
		EndpointPickerRef struct {
			Group *string `json:"group,omitempty"`
			Kind  string  `json:"kind"`
			Name  string  `json:"name"`
			Port  struct {
				Number int32 `json:"number"`
			} `json:"port"`
			FailureMode string `json:"failureMode"`
		} `json:"endpointPickerRef"`
	} `json:"spec"`
}

// decode decodes one rendered object strictly into its Go type.
func decode(m helmchart.Manifest) (any, error) {
	if m.Kind == "InferencePool" {
		var p inferencePool
		if err := yaml.UnmarshalStrict([]byte(m.YAML), &p); err != nil {
			return nil, fmt.Errorf("%s %s: %w", m.Kind, m.Name, err)
		}
		return &p, nil
	}
	obj, gvk, err := strict.Decode([]byte(m.YAML), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s (%s): %w", m.Kind, m.Name, m.Template, err)
	}
	if gvk.GroupVersion().String() != m.APIVersion || gvk.Kind != m.Kind {
		return nil, fmt.Errorf("%s %s decoded as %s", m.Kind, m.Name, gvk)
	}
	return obj, nil
}

// checkConfigFile loads the rendered configuration file with prefixgate's
// own loader, as `prefixgate MODE --config` would: unknown keys, bad
// values and bad backend sources fail.
func checkConfigFile(t *testing.T, mode, content string) config.Settings {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prefixgate.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := config.Serve
	if mode == "epp" {
		cmd = config.EPP
	}
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	fl := config.RegisterFlags(fs, cmd)
	if err := fs.Parse([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	s, err := fl.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("the rendered %s configuration is refused by prefixgate: %s\n%s", mode, strings.ReplaceAll(err.Error(), path, "prefixgate.yaml"), content)
	}
	for _, spec := range s.Server.Backends {
		checkBackendSpec(t, spec)
	}
	return s
}

// checkBackendSpec parses a backend spec as the pool does: discovery
// from the API server in the release's namespace (the Role's), any other
// through backends.ParseDiscovery. The API server test opens the
// Kubernetes ones for real.
func checkBackendSpec(t *testing.T, spec string) {
	t.Helper()
	_, rest, err := backends.SplitEngine(spec)
	if err != nil {
		t.Fatal(err)
	}
	scheme, ref, _ := strings.Cut(rest, "://")
	if scheme == "k8s" || scheme == "inferencepool" {
		if !strings.HasPrefix(ref, namespace+"/") {
			t.Errorf("backend %q is not in the release's namespace %s, where the Role is", spec, namespace)
		}
		return
	}
	if _, err := backends.ParseDiscovery(rest, nil); err != nil {
		t.Errorf("backend %q: %v", spec, err)
	}
}
