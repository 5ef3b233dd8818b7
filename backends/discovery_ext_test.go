package backends_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends"
)

// fakeResolver answers from maps the test edits.
type fakeResolver struct {
	mu   sync.Mutex
	host map[string][]string
	srv  map[string][]*net.SRV
	err  error
}

func (r *fakeResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.host[host] = addrs
}

func (r *fakeResolver) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

func (r *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	return slices.Clone(r.host[host]), nil
}

func (r *fakeResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return "", nil, r.err
	}
	return name, slices.Clone(r.srv[name]), nil
}

// memberLog records OnMembership calls as name lists.
type memberLog struct {
	mu    sync.Mutex
	calls [][]string
}

func (l *memberLog) on(bs []*backends.Backend) {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Name
	}
	l.mu.Lock()
	l.calls = append(l.calls, names)
	l.mu.Unlock()
}

func (l *memberLog) last() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.calls) == 0 {
		return nil, 0
	}
	return l.calls[len(l.calls)-1], len(l.calls)
}

func names(p *backends.Pool) []string {
	var out []string
	for _, b := range p.Backends() {
		out = append(out, b.Name)
	}
	return out
}

func TestDNSDiscovery(t *testing.T) {
	res := &fakeResolver{host: map[string][]string{}, srv: map[string][]*net.SRV{}}
	res.set("vllm.internal", "10.0.0.2", "10.0.0.1", "fd00::1")
	var log memberLog
	p, err := backends.NewPool([]string{"dns://vllm.internal:8000", "static.example:9000"}, backends.Options{
		Resolver: res, OnMembership: log.on, FailThreshold: 1, EjectBackoff: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1:8000", "10.0.0.2:8000", "[fd00::1]:8000", "static.example:9000"}
	if got := names(p); !slices.Equal(got, want) {
		t.Fatalf("initial members %v, want %v", got, want)
	}
	if _, n := log.last(); n != 0 {
		t.Fatal("OnMembership called for the initial list")
	}
	stay, _ := p.Get("10.0.0.1:8000")
	if stay.URL.String() != "http://10.0.0.1:8000" {
		t.Fatalf("URL %s", stay.URL)
	}
	stay.Observe(&backends.UnreachableError{Backend: stay.Name, Err: errors.New("refused")}, 0) // ejected: state that must survive the change
	drained, _ := p.Get("10.0.0.2:8000")
	p.Drain(drained.Name)
	gone, _ := p.Get("[fd00::1]:8000")

	// Same answer in another order: no change.
	res.set("vllm.internal", "fd00::1", "10.0.0.1", "10.0.0.2")
	p.Rediscover(context.Background())
	if _, n := log.last(); n != 0 {
		t.Fatal("OnMembership called for a reordered DNS answer")
	}

	res.set("vllm.internal", "10.0.0.3", "10.0.0.1", "10.0.0.2")
	p.Rediscover(context.Background())
	want = []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "static.example:9000"}
	got, n := log.last()
	if n != 1 || !slices.Equal(got, want) || !slices.Equal(names(p), want) {
		t.Fatalf("after the change: OnMembership %d calls, last %v; members %v; want %v", n, got, names(p), want)
	}
	if b, _ := p.Get(stay.Name); b != stay || b.State() != backends.StateEjected {
		t.Fatal("a backend that stayed lost its state")
	}
	if b, _ := p.Get(drained.Name); b != drained || b.State() != backends.StateDraining {
		t.Fatal("a drained backend that stayed lost its state")
	}
	if b, ok := p.Get(gone.Name); ok || b != nil {
		t.Fatal("the backend that left is still in the pool")
	}
	if b, _ := p.Get(stay.Name); b != stay {
		t.Fatal("the backend that stayed was replaced")
	}
	if b, _ := p.Get("10.0.0.3:8000"); !b.Healthy() {
		t.Fatal("a new backend does not start healthy")
	}

	// Lookups fail, then answer nothing: the last members stay.
	res.fail(errors.New("SERVFAIL"))
	p.Rediscover(context.Background())
	if p.DiscoveryError() == nil || !slices.Equal(names(p), want) {
		t.Fatalf("failed lookup: err %v, members %v", p.DiscoveryError(), names(p))
	}
	res.fail(nil)
	res.set("vllm.internal")
	p.Rediscover(context.Background())
	if !slices.Equal(names(p), []string{"static.example:9000"}) {
		t.Fatalf("empty DNS answer with a static backend left: members %v", names(p))
	}
	res.set("vllm.internal", "10.0.0.1")
	p.Rediscover(context.Background())
	if p.DiscoveryError() != nil {
		t.Fatalf("error %v after recovery", p.DiscoveryError())
	}
	if b, _ := p.Get("10.0.0.1:8000"); b == stay {
		t.Fatal("a backend that left and came back kept its old state")
	}
}

func TestDNSDiscoveryNeverEmpty(t *testing.T) {
	res := &fakeResolver{host: map[string][]string{"v": {"10.0.0.1"}}}
	p, err := backends.NewPool([]string{"dns://v:80"}, backends.Options{Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	res.set("v")
	p.Rediscover(context.Background())
	if !slices.Equal(names(p), []string{"10.0.0.1:80"}) || p.DiscoveryError() == nil {
		t.Fatalf("members %v, error %v: want the last member kept and an error", names(p), p.DiscoveryError())
	}
	if _, err := backends.NewPool([]string{"dns://v:80"}, backends.Options{Resolver: res}); err == nil {
		t.Fatal("NewPool accepted a DNS name with no addresses")
	}
}

func TestSRVDiscovery(t *testing.T) {
	res := &fakeResolver{srv: map[string][]*net.SRV{
		"_http._tcp.vllm.internal": {{Target: "b.vllm.internal.", Port: 8001}, {Target: "a.vllm.internal.", Port: 8000}},
	}}
	var log memberLog
	p, err := backends.NewPool([]string{"srv://_http._tcp.vllm.internal"}, backends.Options{Resolver: res, OnMembership: log.on})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(p), []string{"a.vllm.internal:8000", "b.vllm.internal:8001"}; !slices.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	a, _ := p.Get("a.vllm.internal:8000")
	res.mu.Lock()
	res.srv["_http._tcp.vllm.internal"] = []*net.SRV{{Target: "a.vllm.internal.", Port: 8000}, {Target: "c.vllm.internal.", Port: 8000}}
	res.mu.Unlock()
	p.Rediscover(context.Background())
	got, n := log.last()
	if want := []string{"a.vllm.internal:8000", "c.vllm.internal:8000"}; n != 1 || !slices.Equal(got, want) {
		t.Fatalf("OnMembership %d calls, last %v, want %v", n, got, want)
	}
	if b, _ := p.Get(a.Name); b != a {
		t.Fatal("a backend that stayed was replaced")
	}
}

// TestFileDiscovery edits a watched file while a request is in flight on a
// backend the edit removes: membership follows, the request finishes.
func TestFileDiscovery(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	newSrv := func(slow bool) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slow && r.URL.Path == "/v1/chat/completions" {
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				started <- struct{}{}
				<-release
				io.WriteString(w, "done")
			}
		}))
		t.Cleanup(s.Close)
		return s
	}
	a, b, c := newSrv(true), newSrv(false), newSrv(false)
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	path := filepath.Join(t.TempDir(), "backends.txt")
	write := func(content string) {
		t.Helper()
		// Write then rename, as config management does.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("# fleet\n" + a.URL + "\n\n" + host(b) + "  # bare host:port\n")
	var log memberLog
	p, err := backends.NewPool([]string{"file://" + path}, backends.Options{
		DiscoveryInterval: 2 * time.Millisecond, ProbeInterval: 2 * time.Millisecond, ScrapeInterval: -1, OnMembership: log.on,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(p), sorted(host(a), host(b)); !slices.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	ba, _ := p.Get(host(a))
	bb, _ := p.Get(host(b))
	p.Drain(bb.Name)
	runPool(t, p)

	resp, err := p.Forward(context.Background(), ba, http.MethodPost, "/v1/chat/completions", chatBody(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	write(host(b) + "\n" + c.URL + "\n")
	want := sorted(host(b), host(c))
	waitFor(t, "membership to follow the file", func() bool {
		got, _ := log.last()
		return slices.Equal(got, want)
	})
	if _, ok := p.Get(host(a)); ok {
		t.Fatal("the backend the file dropped is still in the pool")
	}
	if got, _ := p.Get(host(b)); got != bb || bb.State() != backends.StateDraining {
		t.Fatal("the backend that stayed lost its drain state")
	}
	close(release)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "done" {
		t.Fatalf("in-flight request on a removed backend: %q, %v", body, err)
	}

	// A bad line keeps the last good list.
	write("not a url://x\n")
	waitFor(t, "the bad file to be reported", func() bool { return p.DiscoveryError() != nil })
	if !slices.Equal(names(p), want) {
		t.Fatalf("members %v after a bad edit, want %v", names(p), want)
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestParseDiscovery(t *testing.T) {
	for _, tc := range []struct {
		spec, want, err string
	}{
		{spec: "http://a:1", want: "http://a:1"},
		{spec: "a:1", want: "a:1"},
		{spec: "dns://vllm:8000", want: "dns://vllm:8000"},
		{spec: "dns://vllm:8000/v2/", want: "dns://vllm:8000/v2"},
		{spec: "dns://vllm", err: "host:port"},
		{spec: "srv://_http._tcp.vllm", want: "srv://_http._tcp.vllm"},
		{spec: "srv://", err: "srv://"},
		{spec: "file:///etc/backends", want: "file:///etc/backends"},
		{spec: "file://", err: "path"},
		{spec: "ftp://a:1", err: "scheme"},
		{spec: "", err: "empty"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			d, err := backends.ParseDiscovery(tc.spec, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || d.String() != tc.want {
				t.Fatalf("got %v, %v; want %s", d, err, tc.want)
			}
		})
	}
}
