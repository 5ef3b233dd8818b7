package kubedisco_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/epp"
	"github.com/prefixgate/prefixgate/internal/kubedisco"
)

// pick asks the picker for one chat request's endpoint over ext_proc
// (BUFFERED, as a gateway would) and returns it.
func pick(t *testing.T, c extprocv3.ExternalProcessorClient) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hm := &corev3.HeaderMap{}
	for _, kv := range [][2]string{{":method", "POST"}, {":path", "/v1/chat/completions"}, {"content-type", "application/json"}} {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])})
	}
	body, _ := json.Marshal(map[string]any{"model": "vllmsim/tiny", "messages": []map[string]string{{"role": "user", "content": "hello"}}})
	for _, req := range []*extprocv3.ProcessingRequest{
		{ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: filterv3.ProcessingMode_BUFFERED},
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hm}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}},
	} {
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if lb := resp.GetDynamicMetadata().GetFields()[epp.MetadataNamespace].GetStructValue(); lb != nil {
			_ = s.CloseSend()
			return lb.GetFields()[epp.DestinationHeader].GetStringValue()
		}
	}
	t.Fatal("the picker named no endpoint")
	return ""
}

// TestEPPPicksFromInferencePool: `prefixgate epp --backend
// inferencepool://NS/NAME` picks among the pool's ready pods, and follows
// the pool as one pod is deleted and another becomes ready.
func TestEPPPicksFromInferencePool(t *testing.T) {
	c := newCluster(t)
	ip4, ip6 := hostIP(t), hostIPv6()
	if ip6 == "" {
		t.Skip("this machine has no non-loopback IPv6 address for the second pod")
	}
	rs := startReplicas(t, ip4, 1, "epp")
	port := strconv.Itoa(int(rs[0].port))
	sim, err := vllmsim.NewReplica("epp-v6", vllmsim.Config{Preset: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip6, port))
	if err != nil {
		t.Skipf("port %s is taken at %s: %v", port, ip6, err)
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); sim.Close() })

	c.inferencePool("llm", "vllm", int64(rs[0].port))
	c.pod("p4", ip4, true, map[string]string{"app": "vllm"})
	c.pod("p6", ip6, false, map[string]string{"app": "vllm"})
	kubeconfig := t.TempDir() + "/kubeconfig"
	if err := c.srv.WriteKubeconfig(kubeconfig, c.serviceAccount("prefixgate", kubedisco.Rules())); err != nil {
		t.Fatal(err)
	}
	grpcAddr, healthAddr := freeAddr(t), freeAddr(t)
	hc, err := grpc.NewClient(healthAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	run(t, []string{"epp", "--listen", grpcAddr, "--health-listen", healthAddr, "--metrics-listen", "off",
		"--backend", "inferencepool://" + c.ns + "/llm", "--kubeconfig", kubeconfig}, func() bool {
		r, err := healthpb.NewHealthClient(hc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "readiness"})
		return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := extprocv3.NewExternalProcessorClient(cc)
	name4, name6 := net.JoinHostPort(ip4, port), net.JoinHostPort(ip6, port)
	if got := pick(t, client); got != name4 {
		t.Fatalf("picked %q, want the one ready pod %s", got, name4)
	}
	c.setPodReady("p6", true)
	if err := c.cs.CoreV1().Pods(c.ns).Delete(context.Background(), "p4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var got string
	until(t, "the picker follows the pool to "+name6, func() bool { got = pick(t, client); return got == name6 })
	for range 10 {
		if got = pick(t, client); got != name6 {
			t.Errorf("picked %q after the pool moved to %s", got, name6)
		}
	}
}
