package h1front_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/h1front"
)

// The front door under attack: requests and handlers chosen to break its
// framing, its hand-over to net/http and its per-connection state. Each
// test serves its own handler through h1front.ServeFrontDoor.

// serveAttack serves h through the front door on loopback and returns the
// address.
func serveAttack(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := h1front.ServeFrontDoor(h, ln)
	t.Cleanup(stop)
	return ln.Addr().String()
}

// rawAnswers writes raw on one connection, half-closes it and returns
// everything the server sent until it closed. The deadline only keeps a
// broken server from hanging the test.
func rawAnswers(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the answers: %v (after %q)", err, b)
	}
	return string(b)
}

// echoHandler answers with the method, target and the body it read (all of
// it, with a buffer larger than the body, so a read past Content-Length
// would show).
func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		n, _ := io.ReadFull(r.Body, buf)
		fmt.Fprintf(w, "%s %s body=%q", r.Method, r.URL.RequestURI(), buf[:n])
	})
}

// readAnswers parses every answer in raw in order and returns their bodies.
func readAnswers(t *testing.T, raw string) []string {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(raw))
	var bodies []string
	for {
		if _, err := br.Peek(1); err != nil {
			return bodies
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v in %q", len(bodies), err, raw)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d body: %v in %q", len(bodies), err, raw)
		}
		bodies = append(bodies, string(b))
	}
}

// A pipelined run that alternates plain requests (served by the front
// door) with ones it hands to net/http: every request is answered once,
// in order, with exactly its own body, whichever server read which bytes.
func TestFrontPipelinedHandOverKeepsOrder(t *testing.T) {
	addr := serveAttack(t, echoHandler())
	reqs := []string{
		"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nfirst",
		// Not plain (a query): net/http serves this one and the rest.
		"POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\nsecond",
		"POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nthird\r\n0\r\n\r\n",
		"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nConnection: close\r\n\r\nfourth",
	}
	got := readAnswers(t, rawAnswers(t, addr, strings.Join(reqs, "")))
	want := []string{
		`POST /v1/completions body="first"`,
		`POST /v1/completions?x=1 body="second"`,
		`POST /v1/completions body="third"`,
		`POST /v1/completions body="fourth"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("answers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A handler that leaves the body unread: the rest is dropped, not taken
// for the next request's head (smuggling), and the next request is served.
func TestFrontUnreadBodyIsNotARequest(t *testing.T) {
	addr := serveAttack(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "answered "+r.URL.Path)
	}))
	smuggled := "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
	raw := post("/v1/completions", "", smuggled) +
		"GET /readyz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
	got := readAnswers(t, rawAnswers(t, addr, raw))
	want := []string{"answered /v1/completions", "answered /readyz"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("answers %q, want %q", got, want)
	}
}

// A panic in the handler is recovered: the connection closes without a
// well-framed answer (the client must not take a cut stream for a whole
// one) and the server keeps serving new connections.
func TestFrontHandlerPanicClosesConnection(t *testing.T) {
	addr := serveAttack(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/completions":
			panic("boom")
		case "/v1/chat/completions": // a stream cut by a panic
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			panic("boom mid-stream")
		}
		io.WriteString(w, "ok")
	}))
	raw := post("/v1/completions", "", "{}") + "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
	if got := rawAnswers(t, addr, raw); got != "" {
		t.Fatalf("a panicking handler's connection sent %q", got)
	}
	got := rawAnswers(t, addr, post("/v1/chat/completions", "", "{}")+"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(got)), nil)
	if err != nil {
		t.Fatalf("stream head: %v in %q", err, got)
	}
	if b, err := io.ReadAll(resp.Body); err == nil {
		t.Fatalf("a stream cut by a panic read as complete: %q (raw %q)", b, got)
	}
	if strings.Contains(got, "ok") {
		t.Fatalf("the connection served the next request after a panic: %q", got)
	}
	if b := readAnswers(t, rawAnswers(t, addr, "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")); len(b) != 1 || b[0] != "ok" {
		t.Fatalf("after the panics: %q", b)
	}
}

// The framing is decided once: a Content-Length or Transfer-Encoding a
// handler puts in the header after WriteHeader, or a Content-Length on an
// answer that has no body, must not reach the wire beside a framing that
// disagrees with it, or the client reads the next answer as this one's
// body (or waits for bytes that never come).
func TestFrontFramingHeadersFollowTheBytes(t *testing.T) {
	big := strings.Repeat("x", 5000) // past the held, lengthened answer
	addr := serveAttack(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/completions": // length changed after WriteHeader
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(200)
			w.Header().Set("Content-Length", "500")
			io.WriteString(w, "short")
		case "/v1/chat/completions": // a length added after WriteHeader, then a long body
			w.WriteHeader(200)
			w.Header().Set("Content-Length", "3")
			io.WriteString(w, big)
		case "/invocations": // the handler's own Transfer-Encoding on a short body
			w.Header().Set("Transfer-Encoding", "chunked")
			io.WriteString(w, "tiny")
		case "/v1/explain": // a length on a 204
			w.Header().Set("Content-Length", "4")
			w.WriteHeader(http.StatusNoContent)
		default:
			io.WriteString(w, "next")
		}
	}))
	next := "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
	for path, body := range map[string]string{"/v1/completions": "short", "/v1/chat/completions": big, "/invocations": "tiny", "/v1/explain": ""} {
		raw := rawAnswers(t, addr, post(path, "", "{}")+next)
		head, _, _ := strings.Cut(raw, "\r\n\r\n")
		if strings.Contains(head, "Content-Length") && strings.Contains(head, "Transfer-Encoding") {
			t.Errorf("%s: both framings in the head %q", path, head)
		}
		got := readAnswers(t, raw)
		if len(got) != 2 || got[0] != body || got[1] != "next" {
			t.Errorf("%s: answers %.80q, want [%.20q \"next\"]", path, got, body)
		}
	}
}

// Connections opened and dropped in every state leave no goroutine or
// timer behind: idle, mid-head, mid-body, and with a handler still running
// past the watch delay (its background read on).
func TestFrontConnectionsLeaveNoGoroutines(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 200)
	addr := serveAttack(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/explain" {
			started <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
		io.WriteString(w, "ok")
	}))
	// A first round warms what lives for the server's life.
	warm := rawAnswers(t, addr, "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if !strings.Contains(warm, "ok") {
		t.Fatalf("warm-up: %q", warm)
	}
	runtime.GC()
	base := runtime.NumGoroutine()
	states := []string{
		"",                                    // idle
		"POST /v1/completions HTTP/1.1\r\nHo", // mid-head
		"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n{}", // mid-body
		"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",                                 // served, then idle
		"GET /v1/explain HTTP/1.1\r\nHost: a\r\n\r\n",                              // a handler that waits
		"PUT /x HTTP/1.1\r\nHost: a\r\n\r\n",                                       // handed to net/http
	}
	var wg sync.WaitGroup
	for i := range 120 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if s := states[i%len(states)]; s != "" {
				_, _ = io.WriteString(c, s)
				switch {
				case strings.Contains(s, "/v1/explain"):
					<-started // the handler runs; the client leaves under it
				case strings.HasSuffix(s, "\r\n\r\n"):
					_, _ = c.Read(make([]byte, 1)) // served
				}
			}
			c.Close()
		}()
	}
	// The waiting handlers must see their clients leave (the watch), not
	// the release; the release is only for a broken watch.
	wg.Wait()
	var n int
	for range 200 {
		runtime.GC()
		if n = runtime.NumGoroutine(); n <= base {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(release)
	if n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after the connections closed, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// A request context behaves as net/http's: contexts derived from it by
// the context package follow it, and it ends when the handler returns.
func TestFrontContextDerivedAndEnded(t *testing.T) {
	type seen struct {
		derivedErr, afterErr error
		afterRan             bool
	}
	got := make(chan seen, 1)
	addr := serveAttack(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		child, cancel := context.WithCancel(context.WithValue(ctx, struct{}{}, 1))
		ran := make(chan struct{})
		context.AfterFunc(ctx, func() { close(ran) })
		go func() {
			<-child.Done()
			<-ran
			got <- seen{derivedErr: child.Err(), afterErr: ctx.Err(), afterRan: true}
			cancel()
		}()
		io.WriteString(w, "ok")
	}))
	rawAnswers(t, addr, "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	s := <-got
	if s.derivedErr != context.Canceled || s.afterErr != context.Canceled || !s.afterRan {
		t.Fatalf("after the handler: derived %v, own %v, AfterFunc ran %v", s.derivedErr, s.afterErr, s.afterRan)
	}
}

// The same pipelined run arriving in small pieces, and with a head larger
// than the front door's read buffer in the middle: however the bytes are
// split between reads, each request is read once, in order, by one server.
func TestFrontPipelinedInPiecesKeepsOrder(t *testing.T) {
	addr := serveAttack(t, echoHandler())
	big := "X-Big: " + strings.Repeat("b", 9000) + "\r\n" // more than the front door buffers
	reqs := []string{
		"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nfirst",
		"GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /v1/completions HTTP/1.1\r\nHost: a\r\n" + big + "Content-Length: 3\r\n\r\nbig",
		"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nConnection: close\r\n\r\nlast",
	}
	want := []string{
		`POST /v1/completions body="first"`,
		`GET /v1/models body=""`,
		`POST /v1/completions body="big"`,
		`POST /v1/completions body="last"`,
	}
	for _, piece := range []int{1, 7, 100, 4096} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		all := strings.Join(reqs, "")
		go func() {
			for i := 0; i < len(all); i += piece {
				_, _ = io.WriteString(c, all[i:min(i+piece, len(all))])
				if i < 400 {
					time.Sleep(time.Millisecond) // separate reads for the heads' first bytes
				}
			}
		}()
		raw, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatalf("pieces of %d: %v", piece, err)
		}
		if got := readAnswers(t, string(raw)); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("pieces of %d: answers\n%s\nwant\n%s", piece, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// A request sent while the previous one's handler still runs is read by
// the front door's background read one byte early; that byte must lead
// the next request, served here or handed to net/http.
func TestFrontWatchByteLeadsNextRequest(t *testing.T) {
	started := make(chan struct{}, 4)
	addr := serveAttack(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/explain" {
			started <- struct{}{}
			// Long enough for the background read to start and take the
			// next request's first byte.
			time.Sleep(60 * time.Millisecond)
		}
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.RequestURI())
	}))
	for _, next := range []string{
		"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",   // plain
		"PUT /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",   // handed over
		"GET /healthz?q HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", // handed over after the byte
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.WriteString(c, "GET /v1/explain HTTP/1.1\r\nHost: a\r\n\r\n")
		<-started
		_, _ = io.WriteString(c, next)
		raw, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		method, target, _ := strings.Cut(strings.Fields(next)[0]+" "+strings.Fields(next)[1], " ")
		want := []string{"GET /v1/explain", method + " " + target}
		if got := readAnswers(t, string(raw)); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("after %q: answers %q, want %q", next, got, want)
		}
	}
}

// An answer written without reading a large body (a 415 before the body
// is looked at) closes the connection; the client must read that answer,
// not a reset from a close over the bytes it is still sending (net/http
// half-closes and waits for the same reason).
func TestFrontEarlyAnswerOverUnreadBodyIsRead(t *testing.T) {
	addr := serveAttack(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not JSON", http.StatusUnsupportedMediaType)
	}))
	body := strings.Repeat("z", 8<<20)
	for i := range 5 {
		resp, err := http.Post("http://"+addr+"/v1/completions", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatalf("try %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || !resp.Close {
			t.Fatalf("try %d: %d close=%v %q", i, resp.StatusCode, resp.Close, b)
		}
	}
}

// post is the bytes of a POST of body to path with the extra headers.
func post(path, headers, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: router\r\n%sContent-Length: %d\r\n\r\n%s", path, headers, len(body), body)
}
