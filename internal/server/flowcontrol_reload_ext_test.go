package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/route"
)

// startServing is a server in front of a vllmsim fleet of k replicas,
// serving on loopback until the test ends. It returns the server (to
// reload it), its configuration with the fleet's backends, and its base
// URL.
func startServing(t *testing.T, k int, cfg server.Config, sim vllmsim.Config) (*server.Server, server.Config, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", k, sim)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cfg.Backends = append(fleet.URLs(), cfg.Backends...)
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		fleet.Close()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		fleet.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		fleet.Close()
	})
	return srv, cfg, "http://" + ln.Addr().String()
}

// flood sends n requests of fairness id id at once and returns a channel
// of their statuses, closed when all are answered, and a count of those
// answered.
func flood(t *testing.T, url, id string, n int) (<-chan int, *atomic.Int32) {
	var done atomic.Int32
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, _, _ := call(t, http.MethodPost, url, "application/json",
				chatBody("vllmsim/tiny", fmt.Sprintf("%s %d %s", id, i, strings.Repeat("long prompt ", 100)), 20),
				map[string]string{flowgate.FairnessHeader: id})
			done.Add(1)
			statuses <- st
		})
	}
	go func() {
		wg.Wait()
		close(statuses)
	}()
	return statuses, &done
}

// waitQueued waits until at least n requests of flow id wait in flow
// control.
func waitQueued(t *testing.T, base, id string, n int) {
	t.Helper()
	for i := 0; metricSum(t, base, "prefixgate_flow_queued_requests", `flow="`+id+`"`) < float64(n); i++ {
		if i == 2000 {
			t.Fatalf("%d requests of %s never queued in prefixgate", n, id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// allOK fails the test for every status of statuses that is not 200.
func allOK(t *testing.T, what string, statuses <-chan int) {
	t.Helper()
	n := 0
	for st := range statuses {
		n++
		if st != http.StatusOK {
			t.Errorf("%s: a request answered %d", what, st)
		}
	}
	if n == 0 {
		t.Errorf("%s: no answers", what)
	}
}

// An objective added by Reload is honoured without a restart, while a
// flood waits in flow control: the new objective's request goes ahead of
// the flood queued before the reload, and every flood request is
// answered. A second reload turns flow control off with requests queued:
// they are all answered too.
func TestFlowControlReloadObjective(t *testing.T) {
	srv, cfg, base := startServing(t, 1, server.Config{
		Route:       route.Config{Policy: "least-outstanding", DefaultThreshold: 1},
		FlowControl: flowgate.Config{Objectives: map[string]string{"standard": "0"}},
	}, vllmsim.Config{Preset: "tiny", Engine: vllmsim.EngineConfig{MaxNumSeqs: 1}})
	url := base + "/v1/chat/completions"
	urgent := map[string]string{flowgate.FairnessHeader: "vip", flowgate.ObjectiveHeader: "urgent"}
	st, _, msg := call(t, http.MethodPost, url, "application/json", chatBody("vllmsim/tiny", "hi", 4), urgent)
	if st != http.StatusBadRequest || !strings.Contains(string(msg), `unknown objective \"urgent\"`) {
		t.Fatalf("an objective not configured yet: %d %s", st, msg)
	}

	const n = 5
	statuses, done := flood(t, url, "flood", n)
	waitQueued(t, base, "flood", n-2)
	cfg.FlowControl.Objectives = map[string]string{"standard": "0", "urgent": "10"}
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	st, hdr, msg := call(t, http.MethodPost, url, "application/json", chatBody("vllmsim/tiny", "hi", 4), urgent)
	ahead := done.Load()
	if st != http.StatusOK || !strings.Contains(hdr.Get(flowgate.FlowHeader), `fairness_id="vip"; priority=10; objective="urgent"; queued_ms=`) {
		t.Fatalf("the reloaded objective: %d %s %q", st, msg, hdr.Get(flowgate.FlowHeader))
	}
	// First come first served, it would have waited for the n-2 or more
	// flood requests queued before it.
	if ahead > 2 {
		t.Errorf("%d flood requests finished before the urgent one, which should have gone ahead of those queued", ahead)
	}
	allOK(t, "flood across the reload", statuses)
	if got := metricSum(t, base, "prefixgate_flow_dispatched_total", `flow="flood"`); got != n {
		t.Errorf("flood dispatched %v; want %d", got, n)
	}

	statuses, _ = flood(t, url, "second", n)
	waitQueued(t, base, "second", n-2)
	off := false
	cfg.FlowControl.Enabled = &off
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if srv.FlowGate().Enabled() {
		t.Error("flow control still on after the reload turned it off")
	}
	allOK(t, "queued when flow control was turned off", statuses)
	if got := metricSum(t, base, "prefixgate_flow_dispatched_total", `flow="second"`); got != n {
		t.Errorf("second flood dispatched %v; want %d", got, n)
	}
}
