package backends_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// waitFor polls cond until it holds, failing the test after a generous
// bound: the bound catches a hang, it is not a latency assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func startFleet(t *testing.T, k int) *vllmsim.Fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f, err := vllmsim.StartFleet(ctx, "127.0.0.1:0", k, vllmsim.Config{Preset: "tiny", Speed: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); f.Close() })
	return f
}

func runPool(t *testing.T, p *backends.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func chatBody(i int) []byte {
	return fmt.Appendf(nil, `{"model":"vllmsim/tiny","max_tokens":4,"messages":[{"role":"user","content":"request %d: tell me about prefix caches"}]}`, i)
}

// send forwards one request the way the server does: each outcome goes to
// the backend's Observe (an UnreachableError ejects it), and on
// UnreachableError it tries the next healthy one.
func send(ctx context.Context, p *backends.Pool, i int) (string, error) {
	var lastErr error
	for attempt := range 10 {
		var cands []*backends.Backend
		for _, b := range p.Backends() {
			if b.Healthy() {
				cands = append(cands, b)
			}
		}
		if len(cands) == 0 {
			return "", fmt.Errorf("no healthy backends (last error %v)", lastErr)
		}
		b := cands[(i+attempt)%len(cands)]
		resp, err := p.Forward(ctx, b, http.MethodPost, "/v1/chat/completions", chatBody(i), nil)
		if err != nil {
			b.Observe(err, 0)
			if ue := (*backends.UnreachableError)(nil); errors.As(err, &ue) {
				lastErr = err
				continue
			}
			return "", err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		b.Observe(err, resp.StatusCode)
		if err != nil {
			return "", fmt.Errorf("%s: reading body after the first byte: %w", b.Name, err)
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: status %d: %s", b.Name, resp.StatusCode, body)
		}
		return b.Name, nil
	}
	return "", fmt.Errorf("out of attempts: %w", lastErr)
}

func TestCrashedBackendLosesNoRequest(t *testing.T) {
	f := startFleet(t, 3)
	p, err := backends.NewPool(f.URLs(), backends.Options{
		ProbeInterval: 5 * time.Millisecond, ProbeTimeout: time.Second, FailThreshold: 2,
		EjectBackoff: time.Hour, ScrapeInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	runPool(t, p)
	victim, _ := p.Get(strings.TrimPrefix(f.URLs()[1], "http://"))

	ctx := context.Background()
	var served atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := w; ; i += 4 {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := send(ctx, p, i); err != nil {
					errs <- err
					return
				}
				served.Add(1)
			}
		})
	}
	waitFor(t, "some requests before the crash", func() bool { return served.Load() >= 20 })
	f.Replicas()[1].Crash()
	waitFor(t, "the crashed backend to be ejected", func() bool { return victim.State() == backends.StateEjected })
	before := served.Load()
	waitFor(t, "requests after the ejection", func() bool { return served.Load() >= before+20 })
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("request lost: %v", err)
	}
	for _, b := range p.Backends() {
		if b != victim && !b.Healthy() {
			t.Errorf("%s: %v, want healthy", b.Name, b.State())
		}
	}
}

func TestFirstByteTimeoutAndCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	p, err := backends.NewPool([]string{srv.URL}, backends.Options{FirstByteTimeout: 20 * time.Millisecond, FailThreshold: 100})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Backends()[0]
	_, err = p.Forward(context.Background(), b, http.MethodPost, "/v1/chat/completions", chatBody(0), nil)
	var ue *backends.UnreachableError
	if !errors.As(err, &ue) || ue.Backend != b.Name {
		t.Fatalf("slow backend: err %v, want *UnreachableError for %s", err, b.Name)
	}
	if !strings.Contains(err.Error(), "timeout") {
		t.Errorf("error %q does not say timeout", err)
	}

	// The client gives up: that is not the backend's fault, and not
	// retryable.
	p2, err := backends.NewPool([]string{srv.URL}, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	_, err = p2.Forward(ctx, p2.Backends()[0], http.MethodPost, "/v1/chat/completions", chatBody(0), nil)
	if !errors.Is(err, context.Canceled) || errors.As(err, &ue) {
		t.Fatalf("cancelled: err %v, want context.Canceled and not UnreachableError", err)
	}
	p2.Backends()[0].Observe(err, 0)
	if !p2.Backends()[0].Healthy() {
		t.Fatal("a client's cancellation hurt the backend's health")
	}
}

func TestPassiveEjectionOn5xx(t *testing.T) {
	f := startFleet(t, 1)
	r := f.Replicas()[0]
	p, err := backends.NewPool(f.URLs(), backends.Options{FailThreshold: 3, ScrapeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetFaults(vllmsim.Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	b := p.Backends()[0]
	for i := range 3 {
		resp, err := p.Forward(context.Background(), b, http.MethodPost, "/v1/chat/completions", chatBody(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("status %d, want the injected 500", resp.StatusCode)
		}
		if !b.Healthy() {
			t.Fatal("Forward judged the backend: passive health must come from Observe alone")
		}
		b.Observe(nil, resp.StatusCode)
	}
	if b.State() != backends.StateEjected {
		t.Fatalf("state %v after 3 answers of 500, want ejected", b.State())
	}
}

func TestIdleStreamTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"first\":true}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then stall
	}))
	defer srv.Close()
	p, err := backends.NewPool([]string{srv.URL}, backends.Options{IdleTimeout: 30 * time.Millisecond, FailThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Backends()[0]
	resp, err := p.Forward(context.Background(), b, http.MethodPost, "/v1/chat/completions", chatBody(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "data: ") {
		t.Fatalf("first event: %q, %v", buf[:n], err)
	}
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, backends.ErrIdleTimeout) {
		t.Fatalf("stalled stream: err %v, want ErrIdleTimeout", err)
	}
	resp.Body.Close()
	b.Observe(err, resp.StatusCode)
	if b.State() != backends.StateEjected {
		t.Fatalf("state %v after a stalled stream with FailThreshold 1, want ejected", b.State())
	}
}

// TestIdleTimeoutLengthBody: a body of known length whose first bytes
// arrived with the header (read without a timer) and whose rest never
// comes fails with ErrIdleTimeout, as a stalled stream does.
func TestIdleTimeoutLengthBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, `{"partial":`)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then stall
	}))
	defer srv.Close()
	p, err := backends.NewPool([]string{srv.URL}, backends.Options{IdleTimeout: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Forward(context.Background(), p.Backends()[0], http.MethodPost, "/v1/chat/completions", chatBody(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if string(got) != `{"partial":` || !errors.Is(err, backends.ErrIdleTimeout) {
		t.Fatalf("stalled body: %q, %v; want its first bytes and ErrIdleTimeout", got, err)
	}
}

func TestH2C(t *testing.T) {
	var proto atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(int32(r.ProtoMajor))
		io.WriteString(w, `{"ok":true}`)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		h2c  bool
		want int32
	}{{false, 1}, {true, 2}} {
		p, err := backends.NewPool([]string{srv.URL}, backends.Options{H2C: tc.h2c})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p.Forward(context.Background(), p.Backends()[0], http.MethodPost, "/v1/chat/completions", chatBody(0), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := proto.Load(); got != tc.want || int32(resp.ProtoMajor) != tc.want {
			t.Errorf("H2C=%v: server saw HTTP/%d, client HTTP/%d, want %d", tc.h2c, got, resp.ProtoMajor, tc.want)
		}
	}
}

func TestScrapeVLLMSimMetrics(t *testing.T) {
	f := startFleet(t, 1)
	p, err := backends.NewPool(f.URLs(), backends.Options{ScrapeInterval: 5 * time.Millisecond, ProbeInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Backends()[0]
	if l := b.Load(); l.Known || !l.ScrapedAt.IsZero() {
		t.Fatalf("before any scrape: %+v", l)
	}
	runPool(t, p)
	for i := range 3 {
		if _, err := send(context.Background(), p, 7); err != nil { // the same prompt: cache hits
			t.Fatal(i, err)
		}
	}
	waitFor(t, "a scrape that saw the requests", func() bool {
		l := b.Load()
		return l.Known && l.PrefixCacheQueries > 0 && l.PrefixCacheHits > 0
	})
	l := b.Load()
	if l.Err != nil || l.ScrapedAt.IsZero() || l.KVCacheUsage < 0 || l.KVCacheUsage > 1 || l.PrefixCacheHits > l.PrefixCacheQueries {
		t.Fatalf("load %+v", l)
	}
	waitFor(t, "the models probe", func() bool { return len(b.Models()) > 0 })
	if b.Models()[0] != "vllmsim/tiny" {
		t.Fatalf("models %v", b.Models())
	}
}

// TestNonVLLMBackend: a server with none of vLLM's extras (no /metrics, no
// /v1/models) is served, its load flagged unknown.
func TestNonVLLMBackend(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"choices":[{"message":{"content":"hi"}}]}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var rounds atomic.Int64
	p, err := backends.NewPool([]string{srv.URL}, backends.Options{
		ProbeInterval: 2 * time.Millisecond, ScrapeInterval: 2 * time.Millisecond, FailThreshold: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Backends()[0]
	runPool(t, p)
	waitFor(t, "a failed scrape", func() bool { return !b.Load().ScrapedAt.IsZero() })
	for range 5 {
		p.ProbeAll(context.Background())
		rounds.Add(1)
	}
	if l := b.Load(); l.Known || l.Err == nil || l.Running != 0 {
		t.Fatalf("load %+v, want unknown with an error", l)
	}
	if !b.Healthy() || b.Models() != nil {
		t.Fatalf("state %v models %v, want healthy with no model list", b.State(), b.Models())
	}
	if name, err := send(context.Background(), p, 1); err != nil || name != b.Name {
		t.Fatalf("send: %q %v", name, err)
	}
}

// A proxy passes a redirect back to its client, which decides whether to
// follow it; Forward must not follow it itself (http.Client would, for a
// 307 or 308 re-sending the POST body). Every status, both transports, and
// a body over the HTTP/1.1 fast path's limit, which takes the fallback.
func TestForwardPassesRedirectsThrough(t *testing.T) {
	var followed atomic.Int32
	var status atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/moved" {
			followed.Add(1)
			io.WriteString(w, `{"followed":true}`)
			return
		}
		w.Header().Set("Location", "/moved")
		w.WriteHeader(int(status.Load()))
		io.WriteString(w, `{"redirect":true}`)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	small := chatBody(0)
	large := []byte(`{"pad":"` + strings.Repeat("x", 2<<20) + `"}`)
	for _, h2c := range []bool{false, true} {
		p, err := backends.NewPool([]string{srv.URL}, backends.Options{H2C: h2c})
		if err != nil {
			t.Fatal(err)
		}
		for _, code := range []int{301, 302, 303, 307, 308} {
			for _, body := range [][]byte{small, large} {
				status.Store(int32(code))
				resp, err := p.Forward(context.Background(), p.Backends()[0], http.MethodPost, "/v1/chat/completions", body, nil)
				if err != nil {
					t.Fatalf("H2C=%v %d body %d bytes: %v", h2c, code, len(body), err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != code || resp.Header.Get("Location") != "/moved" || string(got) != `{"redirect":true}` {
					t.Errorf("H2C=%v %d body %d bytes: got %d Location %q body %q, want the redirect itself",
						h2c, code, len(body), resp.StatusCode, resp.Header.Get("Location"), got)
				}
			}
		}
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the redirect target was requested %d times, want 0", n)
	}
}
