package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/route"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// stressBackend is a loopback OpenAI backend: it answers after a short
// random delay (so requests are in flight when the fleet changes) and, while
// down, drops every connection without an answer (so the router sees an
// unreachable backend, retries and ejects it).
type stressBackend struct {
	srv    *httptest.Server
	down   atomic.Bool
	served atomic.Int64
}

func newStressBackend(t *testing.T, maxDelay time.Duration) *stressBackend {
	b := &stressBackend{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.down.Load() {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		}
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/health":
			return
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
			return
		case "/v1/chat/completions":
		default:
			http.NotFound(w, r)
			return
		}
		time.Sleep(time.Duration(rand.Int64N(int64(maxDelay))))
		b.served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41,"prompt_tokens_details":{"cached_tokens":16}}}`)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// TestOwnerStress sends concurrent requests through the real router (route +
// backends + server, over loopback HTTP) while reloads change the backend
// set and the policy, an operator drains and undrains, a backend drops its
// connections (ejections) and backends are removed with requests in flight.
// No request may be lost: each ends 200, or with one of the documented
// retryable answers (429 saturated, 502 upstream unreachable, 503 no
// backend), which the client retries. Once idle, every in-flight count —
// the router's total and each member's, as the admin endpoint shows them —
// is zero.
func TestOwnerStress(t *testing.T) {
	const (
		workers   = 8
		perWorker = 120
	)
	// 0 and 1 are never drained, dropped or removed: the fleet always has
	// a healthy backend. 2 is drained and undrained, 3 drops connections,
	// 4 and 5 come and go with reloads.
	var bes []*stressBackend
	for i := range 6 {
		delay := 2 * time.Millisecond
		if i >= 4 {
			delay = 15 * time.Millisecond // long enough to be removed mid-request
		}
		bes = append(bes, newStressBackend(t, delay))
	}
	url := func(i int) string { return bes[i].srv.URL }
	name := func(i int) string { return strings.TrimPrefix(url(i), "http://") }
	retries := 2
	base := server.Config{
		Backends: []string{url(0), url(1), url(2), url(3), url(4)},
		Route:    route.Config{DefaultThreshold: 4, QueueWait: 20 * time.Millisecond},
		Pool:     backends.Options{ProbeInterval: 10 * time.Millisecond},
		Retries:  &retries,
	}
	srv, err := server.New(base, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 10*time.Second) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	admin := httptest.NewServer(srv.AdminHandler())
	defer admin.Close()
	front := "http://" + ln.Addr().String() + "/v1/chat/completions"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()

	// Chaos until the clients are done.
	stop := make(chan struct{})
	var chaosWG sync.WaitGroup
	var reloads, drains, drops atomic.Int64
	chaosWG.Go(func() {
		policies := []string{"prefix-index", "least-outstanding", "consistent-hash", "prefix-aware"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			time.Sleep(3 * time.Millisecond)
			switch i % 4 {
			case 0: // reload: another backend set and policy
				cfg := base
				cfg.Backends = []string{url(0), url(1), url(2), url(3)}
				cfg.Backends = append(cfg.Backends, url(4+i/4%2)) // 4 or 5: the other leaves
				cfg.Route.Policy = policies[i/4%len(policies)]
				if i/4%3 == 0 {
					cfg.Drain = []string{name(2)}
				}
				if err := srv.Reload(cfg); err != nil {
					t.Errorf("reload: %v", err)
					return
				}
				reloads.Add(1)
			case 1: // an operator drains or undrains backend 2
				verb := "drain"
				if i/4%2 == 1 {
					verb = "undrain"
				}
				resp, err := http.Post(admin.URL+"/admin/backends/"+name(2)+"/"+verb, "", nil)
				if err != nil {
					t.Errorf("%s: %v", verb, err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s: status %d", verb, resp.StatusCode)
				}
				drains.Add(1)
			case 2: // backend 3 drops its connections, or comes back
				if bes[3].down.Load() != (i/4%2 == 0) {
					bes[3].down.Store(i/4%2 == 0)
					drops.Add(1)
				}
			}
		}
	})

	var clientWG sync.WaitGroup
	var answered, retried atomic.Int64
	for w := range workers {
		clientWG.Go(func() {
			for n := range perWorker {
				// A few shared prefixes, so affinity and the index matter.
				body := fmt.Appendf(nil, `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"system prompt %d"},{"role":"user","content":"question %d from %d"}]}`, n%7, n, w)
				for attempt := 0; ; attempt++ {
					if attempt == 200 {
						t.Errorf("worker %d request %d: still refused after %d tries", w, n, attempt)
						return
					}
					status, msg := stressPost(client, front, body)
					if status == http.StatusOK {
						answered.Add(1)
						break
					}
					if status != http.StatusTooManyRequests && status != http.StatusBadGateway && status != http.StatusServiceUnavailable {
						t.Errorf("worker %d request %d: status %d %s", w, n, status, msg)
						return
					}
					retried.Add(1)
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	clientWG.Wait()
	close(stop)
	chaosWG.Wait()
	bes[3].down.Store(false)

	if got, want := answered.Load(), int64(workers*perWorker); got != want {
		t.Fatalf("%d requests answered 200, want %d", got, want)
	}
	if reloads.Load() == 0 || drains.Load() == 0 || drops.Load() == 0 {
		t.Fatalf("chaos did not run: %d reloads, %d drains, %d drop toggles", reloads.Load(), drains.Load(), drops.Load())
	}
	var servedTotal int64
	for _, b := range bes {
		servedTotal += b.served.Load()
	}
	if servedTotal < int64(workers*perWorker) {
		t.Fatalf("backends served %d answers, fewer than the %d the clients got", servedTotal, workers*perWorker)
	}
	t.Logf("%d requests, %d client retries, %d reloads, %d drain/undrains, %d drop toggles", answered.Load(), retried.Load(), reloads.Load(), drains.Load(), drops.Load())

	// Idle: every count back to zero. A handler releases its slot as it
	// returns, which may be just after the client read the last byte.
	idle := func() string {
		if n := srv.Router().InFlight(); n != 0 {
			return fmt.Sprintf("router total %d", n)
		}
		for _, st := range srv.Router().Status() {
			if st.InFlight != 0 || st.Load != 0 {
				return fmt.Sprintf("%s: in flight %d, load %d", st.Name, st.InFlight, st.Load)
			}
		}
		return ""
	}
	why := idle()
	for i := 0; why != "" && i < 1000; i++ {
		time.Sleep(5 * time.Millisecond)
		why = idle()
	}
	if why != "" {
		t.Fatalf("not idle after the load: %s", why)
	}
	resp, err := http.Get(admin.URL + "/admin/backends")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Backends []struct {
			Name     string `json:"name"`
			InFlight int64  `json:"in_flight"`
		} `json:"backends"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Backends) != 5 {
		t.Fatalf("admin lists %d backends, want 5", len(list.Backends))
	}
	for _, b := range list.Backends {
		if b.InFlight != 0 {
			t.Errorf("admin: %s has %d in flight when idle", b.Name, b.InFlight)
		}
	}
}

// stressPost sends one chat request and returns its status and, unless
// 200, the start of its body.
func stressPost(c *http.Client, url string, body []byte) (int, string) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	if resp.StatusCode == http.StatusOK && !bytes.Contains(raw, []byte(`"chat.completion"`)) {
		return 0, "200 without a completion: " + string(raw)
	}
	return resp.StatusCode, string(raw[:min(len(raw), 200)])
}

// TestReloadKeepsInFlight: requests held at a backend while a reload
// changes the policy and the backend set stay counted (the router changes in
// place rather than being swapped for one that starts from zero), and their
// completion brings the counts back to zero.
func TestReloadKeepsInFlight(t *testing.T) {
	release := make(chan struct{})
	var active atomic.Int64
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		active.Add(1)
		<-release
		io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[]}`)
	}))
	defer held.Close()
	other := newStressBackend(t, time.Millisecond)
	cfg := server.Config{Backends: []string{held.URL}, Route: route.Config{Policy: "consistent-hash"}}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(srv.Handler())
	defer front.Close()
	const n = 3
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			status, msg := stressPost(front.Client(), front.URL+"/v1/chat/completions", fmt.Appendf(nil, `{"model":"m","messages":[{"role":"user","content":"q%d"}]}`, i))
			if status != http.StatusOK {
				t.Errorf("held request: %d %s", status, msg)
			}
		})
	}
	for i := 0; active.Load() < n && i < 2000; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if active.Load() != n {
		t.Fatalf("%d requests reached the backend, want %d", active.Load(), n)
	}
	cfg.Backends = []string{held.URL, other.srv.URL}
	cfg.Route.Policy = "least-outstanding"
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got := srv.Router().Config().Policy; got != "least-outstanding" {
		t.Fatalf("policy %q after reload", got)
	}
	heldName := strings.TrimPrefix(held.URL, "http://")
	for _, st := range srv.Router().Status() {
		want := 0
		if st.Name == heldName {
			want = n
		}
		if st.InFlight != want {
			t.Errorf("after reload %s has %d in flight, want %d", st.Name, st.InFlight, want)
		}
	}
	close(release)
	wg.Wait()
	for i := 0; srv.Router().InFlight() != 0 && i < 1000; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if got := srv.Router().InFlight(); got != 0 {
		t.Fatalf("%d in flight when idle", got)
	}
}
