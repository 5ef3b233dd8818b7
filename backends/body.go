package backends

import (
	"io"
	"time"

	"github.com/prefixgate/prefixgate/backends/internal/h1client"
)

// ErrIdleTimeout is returned by a body read that waited longer than the idle
// timeout for a byte.
var ErrIdleTimeout = h1client.ErrIdleTimeout

// newIdleBody puts a forwarded response body under the idle timeout: a
// Read that waits more than idle for data fails with ErrIdleTimeout and
// closes the body, for server-sent event streams whose backend stalls;
// the stall counts as a failure of its backend when the error reaches
// Observe (h1client.IdleBody).
func newIdleBody(rc io.ReadCloser, idle time.Duration) io.ReadCloser {
	return h1client.NewIdleBody(rc, idle)
}
