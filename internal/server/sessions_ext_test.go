package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/route"
)

// TestSessionHeaderKeepsAConversationOnOneReplica: requests of one
// session whose prompts share nothing stay on the replica the session
// began on; the same prompts without the header spread over the fleet.
func TestSessionHeaderKeepsAConversationOnOneReplica(t *testing.T) {
	base := startRouter(t, 3, server.Config{})
	send := func(i int, hdr map[string]string) string {
		body := routeBody("/v1/chat/completions", fmt.Sprintf("unrelated prompt number %d about topic %d. ", i, i*7919), "go on")
		status, h, raw := call(t, "POST", base+"/v1/chat/completions", "application/json", body, hdr)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, raw)
		}
		return h.Get(server.BackendHeader)
	}
	for s := range 4 {
		hdr := map[string]string{"X-Session-Id": fmt.Sprint("session-", s)}
		first := send(s*100, hdr)
		for i := 1; i < 10; i++ {
			if got := send(s*100+i, hdr); got != first {
				t.Fatalf("session %d request %d went to %s, the session is on %s", s, i, got, first)
			}
		}
	}
	spread := map[string]bool{}
	for i := range 30 {
		spread[send(1000+i, nil)] = true
	}
	if len(spread) < 2 {
		t.Errorf("without a session, 30 unrelated prompts all went to %v", spread)
	}
}

// TestSessionLeavesAFullReplica: a session whose replica is at its
// threshold is placed by the policy on another (not refused), and the
// session follows it there.
func TestSessionLeavesAFullReplica(t *testing.T) {
	release := make(chan struct{})
	backend := func() string {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/models":
				_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m"}]}`)
			case "/v1/chat/completions":
				body, _ := io.ReadAll(r.Body)
				if strings.Contains(string(body), "hold") {
					<-release
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
			}
		}))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	srv, err := server.New(server.Config{Backends: []string{backend(), backend()}, Route: route.Config{DefaultThreshold: 1}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := serveFor(t, srv)
	hdr := map[string]string{"X-Session-Id": "s"}
	send := func(text string) (int, string) {
		status, h, _ := call(t, "POST", base+"/v1/chat/completions", "application/json",
			[]byte(`{"model":"m","messages":[{"role":"user","content":"`+text+`"}]}`), hdr)
		return status, h.Get(server.BackendHeader)
	}
	_, home := send("first")
	held := make(chan string, 1)
	go func() { _, b := send("hold on"); held <- b }()
	for srv.Router().InFlight() != 1 {
		time.Sleep(time.Millisecond)
	}
	status, moved := send("third")
	close(release)
	if b := <-held; b != home {
		t.Errorf("the held request went to %s, its session is on %s", b, home)
	}
	if status != http.StatusOK || moved == home {
		t.Fatalf("with %s full: status %d on %s, want 200 on the other replica", home, status, moved)
	}
	if _, next := send("fourth"); next != moved {
		t.Errorf("the session did not follow: %s, then %s", moved, next)
	}
}
