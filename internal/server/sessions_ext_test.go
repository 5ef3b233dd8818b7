package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/prefixgate/prefixgate/internal/server"
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
