package backends

import (
	"time"
	"unicode/utf8"
)

// Health is what the pool knows of a backend's health: its State, when
// that last changed, and the last failure it saw, so that an operator can
// tell why a backend is out.
type Health struct {
	State State
	// Since is when State last changed; zero while it has not changed
	// since the backend joined the pool.
	Since time.Time
	// LastError is the last failed probe or request, empty while none has
	// failed; LastErrorAt is when it failed.
	LastError   string
	LastErrorAt time.Time
}

// maxCauseLen bounds a stored failure: an error may quote a backend's
// answer, and it is repeated in logs and client-facing messages.
const maxCauseLen = 256

// Health returns the backend's health with the cause of its last failure.
func (b *Backend) Health() Health {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Health{State: b.State(), Since: b.changedAt, LastError: b.lastErr, LastErrorAt: b.lastErrAt}
}

// noteErrLocked records a failure as the backend's last error.
func (b *Backend) noteErrLocked(cause string, now time.Time) {
	b.lastErr, b.lastErrAt = truncate(cause, maxCauseLen), now
}

// Describe says in a few words why a backend in this Health is or is not a
// candidate: "healthy", "draining", or for an ejected one since when and
// its last failure, e.g. "ejected 12s ago: probe: GET /health: dial tcp
// 10.0.0.5:8000: connect: connection refused", with ages measured at now.
func (h Health) Describe(now time.Time) string {
	s := h.State.String()
	if h.State != StateEjected {
		return s
	}
	if !h.Since.IsZero() {
		s += " " + age(now.Sub(h.Since)) + " ago"
	}
	if h.LastError != "" {
		s += ": " + h.LastError
		if h.LastErrorAt.Sub(h.Since) >= time.Second {
			s += " (" + age(now.Sub(h.LastErrorAt)) + " ago)"
		}
	}
	return s
}

// age rounds d to whole seconds for a person (and so that one
// explanation, read twice within a second, says the same).
func age(d time.Duration) string { return max(d, 0).Round(time.Second).String() }

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
