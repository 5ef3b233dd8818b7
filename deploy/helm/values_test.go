package helmchart_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	helmchart "github.com/prefixgate/prefixgate/deploy/helm"
)

// TestBadValuesAreRefusedWithTheirName renders values an operator could
// get wrong and checks that each is refused, naming the value.
func TestBadValuesAreRefusedWithTheirName(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"replicaCont: 3\n", "replicaCont"},
		{"mode: router\n", "mode"},
		{"ports:\n  http: 70000\n", "/ports/http"},
		{"inferencePool:\n  failureMode: FailSometimes\n", "/inferencePool/failureMode"},
		{"serviceMonitor:\n  enable: true\n", "enable"},
		{"config:\n  listen: 0.0.0.0:9000\n", "config.listen: the chart sets it"},
		{"config:\n  drain_timeout: 10s\n", "config.drain_timeout: the chart sets it"},
		{"config:\n  backends: []\n", "config.backends: no backends"},
		{"discovery:\n  service: vllm\n", "config.backends: k8s://inference/vllm:http reads the API server"},
		{"mode: epp\nconfig:\n  backends: []\ninferencePool:\n  create: false\n", "config.backends: no backends"},
	} {
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte(tc.values), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := helmchart.Render(chartDir, release, namespace, filepath.Join(chartDir, "profiles", "serve-static-backends.yaml"), file)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %q: error %v, want one naming %q", tc.values, err, tc.want)
		}
	}
}
