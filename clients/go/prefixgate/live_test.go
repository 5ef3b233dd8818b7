package prefixgate_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/clients/go/prefixgate"
	"github.com/prefixgate/prefixgate/internal/server"
)

// routerURL returns PREFIXGATE_URL when set (a router started by
// internal/testfleet), else starts an in-process router in front of a
// simulated fleet. Only this test file imports the server; the SDK does not.
func routerURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("PREFIXGATE_URL"); u != "" {
		return u
	}
	ctx, cancel := context.WithCancel(context.Background())
	fleet, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", 3, vllmsim.Config{Preset: "tiny", Speed: 50})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Backends: fleet.URLs()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
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
	return "http://" + ln.Addr().String()
}

func liveSpec() prefixgate.PromptSpec {
	s := sampleSpec()
	s.Tools = nil // keep the simulated backend's prompt small
	s.Group = "sdk-go"
	return s
}

func TestLiveChat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	c := prefixgate.NewClient(nil, routerURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := liveSpec()
	_, ri, err := prefixgate.BuildKey(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Chat(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetContent() == "" || res.GetRouting().GetBackend() == "" {
		t.Errorf("empty answer or routing: %v", res)
	}
	// The key the SDK computes locally is the key the router used.
	if got := res.GetRouting().GetKey(); got != ri.KeyHex() {
		t.Errorf("router key %s, SDK key %s", got, ri.KeyHex())
	}

	st, err := c.ChatStream(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var text strings.Builder
	n := 0
	for st.Receive() {
		if n == 0 && st.Msg().GetRouting().GetKey() != ri.KeyHex() {
			t.Errorf("stream routing %v, want key %s", st.Msg().GetRouting(), ri.KeyHex())
		}
		n++
		text.WriteString(st.Msg().GetDelta())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 || text.Len() == 0 {
		t.Errorf("stream: %d messages, text %q", n, text.String())
	}
}

func TestLiveNormalizeAndAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	c := prefixgate.NewClient(nil, routerURL(t), connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := []byte(`{ "messages":[{"role":"system","content":"S"},{"role":"user","content":"q"}], "model":"vllmsim/tiny", "metadata":{"t":"1"} }`)
	local, ri, err := prefixgate.CanonicalizeAndKey(body, prefixgate.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.NormalizeBody(ctx, body, prefixgate.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.GetCanonicalBody()) != string(local) || res.GetKey() != ri.KeyHex() {
		t.Errorf("server %s %s, local %s %s", res.GetCanonicalBody(), res.GetKey(), local, ri.KeyHex())
	}

	_, err = c.NormalizeBody(ctx, []byte(`{"a":1,}`), prefixgate.KeyOptions{})
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "offset 7") {
		t.Errorf("invalid JSON: %v, want InvalidArgument with offset 7", err)
	}

	bs, err := c.ListBackends(ctx)
	if err != nil || len(bs.GetBackends()) == 0 {
		t.Fatalf("ListBackends: %v %v", bs, err)
	}
	ex, err := c.Explain(ctx, body, prefixgate.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ex.GetRouting().GetKey() != ri.KeyHex() || ex.GetRouting().GetBackend() == "" {
		t.Errorf("Explain %v, want key %s", ex, ri.KeyHex())
	}
}
