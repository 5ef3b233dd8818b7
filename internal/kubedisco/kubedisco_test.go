package kubedisco_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prefixgate/prefixgate/internal/kubedisco"
)

// TestEndpointSlices: k8s:// lists the ready endpoints of every slice of
// the Service at the named (or numbered) port; not-ready and terminating
// endpoints drop out, and each change calls changed.
func TestEndpointSlices(t *testing.T) {
	c := newCluster(t)
	c.slice("vllm-a", "vllm", 8000, endpoint("192.0.2.10", true, false), endpoint("192.0.2.11", false, false))
	c.slice("vllm-b", "vllm", 8001, endpoint("192.0.2.12", true, false))
	c.slice("other", "other", 8000, endpoint("192.0.2.99", true, false))
	var changes atomic.Int64
	cfg := kubedisco.Config{REST: c.srv.Config()}
	byName := open(t, cfg, "k8s://"+c.ns+"/vllm:http", &changes)
	// Without a namespace: Config.Namespace's.
	byNumber := open(t, kubedisco.Config{REST: c.srv.Config(), Namespace: c.ns}, "k8s://vllm:8001", &changes)
	eventually(t, byName, "http://192.0.2.10:8000", "http://192.0.2.12:8001")
	eventually(t, byNumber, "http://192.0.2.12:8001")

	before := changes.Load()
	c.slice("vllm-a", "vllm", 8000, endpoint("192.0.2.10", false, true), endpoint("192.0.2.11", true, false))
	eventually(t, byName, "http://192.0.2.11:8000", "http://192.0.2.12:8001")
	c.deleteSlice("vllm-b")
	eventually(t, byName, "http://192.0.2.11:8000")
	eventually(t, byNumber)
	if changes.Load() == before {
		t.Error("changed was not called for updates and deletes")
	}
}

// TestInferencePool: inferencepool:// lists podIP:port for each ready pod
// the pool selects and each target port, with the engine its label or
// annotation names; a pod being deleted drops out.
func TestInferencePool(t *testing.T) {
	c := newCluster(t)
	c.inferencePool("llm", "vllm", 8000, 8001)
	c.pod("p0", "192.0.2.20", true, map[string]string{"app": "vllm", kubedisco.EngineKey: "vllm"})
	c.pod("p1", "192.0.2.21", false, map[string]string{"app": "vllm"})
	c.pod("p2", "192.0.2.22", true, map[string]string{"app": "sglang"})
	var changes atomic.Int64
	d := open(t, kubedisco.Config{REST: c.srv.Config()}, "inferencepool://"+c.ns+"/llm", &changes)
	eventually(t, d, "vllm+http://192.0.2.20:8000", "vllm+http://192.0.2.20:8001")

	c.setPodReady("p1", true)
	eventually(t, d, "vllm+http://192.0.2.20:8000", "vllm+http://192.0.2.20:8001", "http://192.0.2.21:8000", "http://192.0.2.21:8001")
	// A scheduled pod's deletion waits for its kubelet: it is terminating.
	if err := c.cs.CoreV1().Pods(c.ns).Delete(context.Background(), "p0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, d, "http://192.0.2.21:8000", "http://192.0.2.21:8001")

	c.pod("p3", "192.0.2.23", true, map[string]string{"app": "vllm"})
	p3, err := c.cs.CoreV1().Pods(c.ns).Get(context.Background(), "p3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p3.Annotations = map[string]string{kubedisco.EngineKey: "tgi"}
	if _, err := c.cs.CoreV1().Pods(c.ns).Update(context.Background(), p3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var derr error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && derr == nil; time.Sleep(20 * time.Millisecond) {
		_, derr = d.Discover(context.Background())
	}
	if derr == nil || !strings.Contains(derr.Error(), "pod "+c.ns+"/p3: annotation prefixgate.io/engine") {
		t.Errorf("a bad engine annotation: %v", derr)
	}
}

// TestParseErrors: a malformed spec is refused with what is wrong, before
// any API call.
func TestParseErrors(t *testing.T) {
	open := kubedisco.Opener(kubedisco.Config{Kubeconfig: "/nonexistent"})
	for spec, want := range map[string]string{
		"k8s://a/b/vllm:http":         "too many path segments",
		"k8s://ns/vllm":               "no port",
		"k8s://ns/vllm:0":             "port 0 is not 1..65535",
		"k8s://ns/vllm:Not_A_Name":    "port name",
		"k8s://NS/vllm:http":          `namespace "NS"`,
		"k8s://ns/vllm:http?x=1":      "unexpected characters",
		"inferencepool://":            `name ""`,
		"inferencepool://ns/a/b":      "too many path segments",
		"inferencepool://ns/Bad_Name": `name "Bad_Name"`,
		"consul://ns/x":               `scheme "consul"`,
	} {
		_, err := open(spec, func() {})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), spec) {
			t.Errorf("%s: %v, want an error naming the spec and %q", spec, err, want)
		}
	}
	// A good spec with no way to reach a cluster says so.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := kubedisco.Opener(kubedisco.Config{})("k8s://ns/vllm:http", func() {})
	if err == nil || !strings.Contains(err.Error(), "no kubeconfig is set") {
		t.Errorf("outside a cluster: %v", err)
	}
}
