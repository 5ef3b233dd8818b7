package kubedisco_test

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/kubedisco"
)

// phaseRequests is how many requests each phase of the scaling test
// answers; the whole test sends a bounded number.
const phaseRequests = 160

// TestScaleUnderLoad scales a Service's EndpointSlices 2 -> 8 -> 3 under a
// steady load through `prefixgate serve` (k8s://, with the least-privilege
// service account's token), then kills the API server and brings it back
// on the same etcd. Every request must be answered; no request issued
// after prefixgate dropped an endpoint may reach it; each new endpoint
// takes a request within 1 s of its slice being written; the prefix cache
// hit rate of each phase is within 2 points of a static fleet of that
// size (or above it).
func TestScaleUnderLoad(t *testing.T) {
	c := newCluster(t)
	ip := hostIP(t)
	rs := startReplicas(t, ip, 8, "k8s")
	name := func(i int) string { return net.JoinHostPort(ip, strconv.Itoa(int(rs[i].port))) }
	ready := func(i int) { c.slice(fmt.Sprintf("vllm-%d", i), "vllm", rs[i].port, endpoint(ip, true, false)) }
	ready(0)
	ready(1)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.srv.WriteKubeconfig(kubeconfig, c.serviceAccount("prefixgate", kubedisco.Rules())); err != nil {
		t.Fatal(err)
	}
	r := serve(t, "--backend", "vllm+k8s://"+c.ns+"/vllm:http", "--kubeconfig", kubeconfig)
	l := newLoad(r.base, 40*phaseRequests)
	l.start()
	defer l.halt()

	var rates [3]float64
	rates[0] = phase(t, l, rs[:2])
	// 2 -> 8: each new endpoint takes traffic within 1 s of being ready.
	readyAt := make([]time.Time, 8)
	for i := 2; i < 8; i++ {
		ready(i)
		readyAt[i] = time.Now()
	}
	rates[1] = phase(t, l, rs)
	for i := 2; i < 8; i++ {
		_, n, first := rs[i].stats()
		if n == 0 || first.Sub(readyAt[i]) > time.Second {
			t.Errorf("%s: first request %v after its slice was written (%d requests)", name(i), first.Sub(readyAt[i]), n)
		} else {
			t.Logf("%s: first request %v after its slice was written", name(i), first.Sub(readyAt[i]).Round(time.Millisecond))
		}
	}
	// 8 -> 3: the endpoints terminate; none takes a request issued after
	// prefixgate dropped it.
	for i := 3; i < 8; i++ {
		c.slice(fmt.Sprintf("vllm-%d", i), "vllm", rs[i].port, endpoint(ip, false, true))
	}
	until(t, "prefixgate drops the terminating endpoints", func() bool {
		bs := r.backends(t)
		return !slices.ContainsFunc([]int{3, 4, 5, 6, 7}, func(i int) bool { return bs[name(i)] })
	})
	observed := l.seq.Load()
	rates[2] = phase(t, l, rs[:3])
	for i := 3; i < 8; i++ {
		if got, _, _ := rs[i].stats(); got > observed {
			t.Errorf("%s took request %d, issued after its removal was observed (at %d)", name(i), got, observed)
		}
	}
	apiServerAway(t, c, r, l, func() { ready(3) }, name(3))
	l.halt()
	t.Logf("%d requests answered through the scaling and the API server's absence, %d failed", l.done.Load(), l.failed.Load())
	if l.failed.Load() > 0 {
		t.Errorf("%d of %d requests failed: %v", l.failed.Load(), l.done.Load(), l.errs)
	}
	compareStatic(t, ip, rates)
}

// phase runs phaseRequests requests and returns the hit rate (percent) of
// rs over them.
func phase(t *testing.T, l *load, rs []*replica) float64 {
	h0, q0 := fleetHits(rs)
	l.waitDone(t, phaseRequests)
	h1, q1 := fleetHits(rs)
	return 100 * float64(h1-h0) / float64(max(q1-q0, 1))
}

// apiServerAway kills the API server under load, checks that routing goes
// on over the last known endpoints, brings it back, and checks that a
// change made then (add) reaches prefixgate: the watch resumed.
func apiServerAway(t *testing.T, c *cluster, r *router, l *load, add func(), added string) {
	t.Helper()
	before := r.backends(t)
	failed := l.failed.Load()
	c.srv.StopAPIServer()
	down := time.Now()
	l.waitDone(t, phaseRequests/2)
	if got := r.backends(t); len(got) != len(before) {
		t.Errorf("with the API server away the pool holds %v, want the last known %v", got, before)
	}
	if err := c.srv.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server away for %v; %d requests answered meanwhile", time.Since(down).Round(time.Millisecond), phaseRequests/2)
	add()
	written := time.Now()
	until(t, "prefixgate sees the endpoint added after the API server came back", func() bool { return r.backends(t)[added] })
	t.Logf("the watch resumed and caught up %v after the change", time.Since(written).Round(time.Millisecond))
	if l.failed.Load() != failed {
		t.Errorf("%d requests failed while the API server was away", l.failed.Load()-failed)
	}
}

// compareStatic runs the same phases against static fleets of 2, 8 and 3
// fresh replicas and compares hit rates.
func compareStatic(t *testing.T, ip string, rates [3]float64) {
	t.Helper()
	for i, n := range []int{2, 8, 3} {
		rs := startReplicas(t, ip, n, "static"+strconv.Itoa(n))
		args := []string{}
		for _, r := range rs {
			args = append(args, "--backend", "vllm+http://"+net.JoinHostPort(ip, strconv.Itoa(int(r.port))))
		}
		router := serve(t, args...)
		l := newLoad(router.base, phaseRequests)
		l.start()
		static := phase(t, l, rs)
		l.halt()
		if l.failed.Load() > 0 {
			t.Errorf("static fleet of %d: %d requests failed: %v", n, l.failed.Load(), l.errs)
		}
		t.Logf("hit rate, %d replicas: discovered %.1f%%, static %.1f%%", n, rates[i], static)
		if rates[i] < static-2 {
			t.Errorf("%d replicas: hit rate %.1f%% is more than 2 points under the static fleet's %.1f%%", n, rates[i], static)
		}
	}
}
