package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/server"
)

// TestFrontHandoverAfterASlowRequestKeepsItsContext: a request read whole
// leaves its head's deadline in place, and a request that outlasts it
// leaves it expired. When the bytes after that request are the first few
// of one the front door hands to net/http (a method other than GET or
// POST decides that from its first byte), net/http's server peeks for the
// HTTP/2 preface, a read from the connection; on the expired deadline it
// would fail, and net/http would take that for the connection's end and
// cancel its context, every later request's on it included. (It sets its
// own header deadline first, so it does not.) The requests after the
// handover are served as if nothing had happened: the last one, a chat
// completion that net/http's side forwards, answers 200.
func TestFrontHandoverAfterASlowRequestKeepsItsContext(t *testing.T) {
	const head = 30 * time.Millisecond
	t.Cleanup(server.SetHeaderTimeout(head)) // after the routers below stop
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "slow") {
			time.Sleep(4 * head) // past the head's deadline
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	defer backend.Close()
	addr := frontRouterWith(t, server.Config{Backends: []string{backend.URL}})
	chat := func(content string, extra string) string {
		body := `{"model":"m","messages":[{"role":"user","content":"` + content + `"}]}`
		return "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n" + extra +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	// The slow plain request with the next request's first bytes, then
	// (while the slow one runs) the rest: a DELETE that goes to net/http,
	// and a chat completion, which net/http serves too (a connection handed
	// over stays with it).
	first := chat("slow", "") + "DELETE"
	rest := " /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n" +
		chat("after", "Connection: close\r\n")
	got := exchangeInTwo(t, addr, first, rest, head/3)
	if len(got) != 3 || !strings.Contains(got[0], " 200 OK") || !strings.Contains(got[2], " 200 OK") {
		t.Fatalf("answers:\n%s\nwant three, the first and the last 200", strings.Join(got, "\n"))
	}
}

// exchangeInTwo is exchange with raw sent in two writes, pause apart.
func exchangeInTwo(t *testing.T, addr, first, second string, pause time.Duration) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a broken router must not hang the test
	if _, err := io.WriteString(c, first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(pause)
	if _, err := io.WriteString(c, second); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var got []string
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return got
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = append(got, describe(resp, body))
	}
}
