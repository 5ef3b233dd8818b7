package kubedisco_test

import (
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/kubedisco"
)

// hostIPv6 is a non-loopback, non-link-local IPv6 address of this
// machine, or "" when it has none.
func hostIPv6() string {
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	return ""
}

// TestInferencePoolServe routes through `prefixgate serve --backend
// inferencepool://NS/NAME` over two pods, one per address family of the
// machine, on the pool's one target port: a pod takes requests once
// ready, and none issued after prefixgate dropped a deleted pod.
func TestInferencePoolServe(t *testing.T) {
	c := newCluster(t)
	ip4, ip6 := hostIP(t), hostIPv6()
	if ip6 == "" {
		t.Skip("this machine has no non-loopback IPv6 address for the second pod")
	}
	rs := startReplicas(t, ip4, 1, "pool")
	// The second pod listens on the same port at the other address.
	sim, err := vllmsim.NewReplica("pool-v6", vllmsim.Config{Preset: "tiny", Speed: 20, DefaultMaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(int(rs[0].port))
	ln, err := net.Listen("tcp", net.JoinHostPort(ip6, port))
	if err != nil {
		t.Skipf("port %s is taken at %s: %v", port, ip6, err)
	}
	r6 := &replica{sim: sim, port: rs[0].port}
	r6.srv = &http.Server{Handler: r6, ReadHeaderTimeout: 10 * time.Second}
	go r6.srv.Serve(ln)
	t.Cleanup(func() { r6.srv.Close(); sim.Close() })

	c.inferencePool("llm", "vllm", int64(rs[0].port))
	c.pod("p4", ip4, true, map[string]string{"app": "vllm", kubedisco.EngineKey: "vllm"})
	c.pod("p6", ip6, false, map[string]string{"app": "vllm", kubedisco.EngineKey: "vllm"})
	kubeconfig := t.TempDir() + "/kubeconfig"
	if err := c.srv.WriteKubeconfig(kubeconfig, c.serviceAccount("prefixgate", kubedisco.Rules())); err != nil {
		t.Fatal(err)
	}
	router := serve(t, "--backend", "inferencepool://"+c.ns+"/llm", "--kubeconfig", kubeconfig)
	l := newLoad(router.base, 240)
	l.start()
	defer l.halt()
	l.waitDone(t, 40)
	if _, n, _ := r6.stats(); n != 0 {
		t.Errorf("the pod that is not ready took %d requests", n)
	}
	c.setPodReady("p6", true)
	name6 := net.JoinHostPort(ip6, port)
	until(t, "prefixgate adds the ready pod", func() bool { return router.backends(t)[name6] })
	l.waitDone(t, 60)
	if _, n, _ := r6.stats(); n == 0 {
		t.Error("the pod that became ready took no request")
	}
	if err := c.cs.CoreV1().Pods(c.ns).Delete(t.Context(), "p4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	name4 := net.JoinHostPort(ip4, port)
	until(t, "prefixgate drops the deleted pod", func() bool { return !router.backends(t)[name4] })
	observed := l.seq.Load()
	l.waitDone(t, 60)
	if got, _, _ := rs[0].stats(); got > observed {
		t.Errorf("the deleted pod took request %d, issued after its removal was observed (at %d)", got, observed)
	}
	if l.failed.Load() > 0 {
		t.Errorf("%d of %d requests failed: %v", l.failed.Load(), l.done.Load(), l.errs)
	}
}
