package epp

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/route"
)

// TestSessionKeepsItsEndpoint: requests whose prompts share nothing go
// where the policy sends them, which is over several endpoints; with one
// session header they all go to the endpoint of the session's first
// request, as serve sends them.
func TestSessionKeepsItsEndpoint(t *testing.T) {
	h := newHarness(t, route.Config{}, pipeline.Config{})
	send := func(i int, extra ...string) string {
		t.Helper()
		// A different long system prompt each time: no shared prefix.
		system := strings.Repeat("Topic "+strconv.Itoa(i)+" of a tool loop that rewrites its history. ", 60)
		s, r := h.buffered(t, chatBody(system, "next step"), nil, extra...)
		dest, ok := headerValue(r.GetRequestBody().GetResponse().GetHeaderMutation(), DestinationHeader)
		if !ok {
			t.Fatalf("request %d: no destination in %v", i, r)
		}
		s.CloseSend()
		_, _ = s.Recv()
		return dest
	}
	var alone, session []string
	for i := range 12 {
		alone = append(alone, send(i))
	}
	for i := range 12 {
		session = append(session, send(100+i, "x-session-id", "conversation-7"))
	}
	if len(slices.Compact(slices.Sorted(slices.Values(alone)))) < 2 {
		t.Fatalf("without a session every request went to %v: the test cannot tell a session apart", alone)
	}
	for i, d := range session {
		if d != session[0] {
			t.Fatalf("session request %d went to %s, the session's first to %s (all: %v)", i, d, session[0], session)
		}
	}
	waitInFlight(t, h, 0)
}
