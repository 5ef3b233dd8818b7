package loadgen

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/route"
)

// startStack runs an in-process vllmsim fleet behind the router on loopback
// and returns the router's base URL.
func startStack(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", 3, vllmsim.Config{Preset: "tiny", Speed: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	srv, err := server.New(server.Config{Backends: fleet.URLs(), Route: route.Config{Policy: "prefix-aware"}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() { served <- srv.Serve(sctx, ln, time.Second) }()
	t.Cleanup(func() { stop(); <-served })
	return "http://" + ln.Addr().String()
}

func TestBenchAgainstFleet(t *testing.T) {
	url := startStack(t)
	for _, o := range []Options{
		{URL: url, Model: "vllmsim/tiny", Workload: "sharegpt", Concurrency: 4, Requests: 24, MaxTokens: 4},
		{URL: url, Model: "vllmsim/tiny", Workload: "zipf", Rate: 200, Requests: 16, MaxTokens: 4},
	} {
		calls := 0
		o.Progress = func(done, total int) { calls++ }
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if res.OK != o.Requests || res.Errors != 0 {
			t.Fatalf("%s: %d ok, %d errors %v", res.Mode, res.OK, res.Errors, res.ErrorSamples)
		}
		if calls != o.Requests {
			t.Errorf("progress called %d times", calls)
		}
		total := 0
		for b, n := range res.Backends {
			if !strings.Contains(b, "127.0.0.1:") {
				t.Errorf("backend %q does not look like a fleet member", b)
			}
			total += n
		}
		if total != o.Requests {
			t.Errorf("backend counts sum to %d", total)
		}
		if res.TTFT.P50 <= 0 || res.Latency.P99 < res.TTFT.P50 || res.PromptTokens == 0 {
			t.Errorf("implausible measurements: %+v", res)
		}
		if o.Workload == "zipf" && res.CachedTokens == 0 {
			t.Error("no cached tokens reported on a zipf workload")
		}
	}
}

func TestBenchOptions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Workload: "zipf", Rate: 1, Requests: 1}, "--url is required"},
		{Options{URL: "localhost:1", Rate: 1, Requests: 1}, "must start with http://"},
		{Options{URL: "http://x", Requests: 1}, "exactly one of --rate"},
		{Options{URL: "http://x", Rate: 1, Concurrency: 2, Requests: 1}, "exactly one of --rate"},
		{Options{URL: "http://x", Rate: 1}, "set --requests or --duration"},
	} {
		if _, err := Run(context.Background(), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) error %v, want %q", tc.o, err, tc.want)
		}
	}
}
