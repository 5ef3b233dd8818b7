// Package pipeline is what every entry point does to a request before it is
// forwarded: the tenant (API key), the body's decoding (gzip, zstd, within
// the size and ratio limits), normalization (canonical form, routing text,
// block hashes), the routing key, the pick's bookkeeping, and the one
// mapping of these steps' errors to the HTTP status, OpenAI error code and
// message a client sees. The HTTP/Connect server (internal/server) and the
// endpoint picker (internal/epp) both run requests through it, so that the
// same body gets the same key, limits and errors from either.
//
// It does not read from the network, forward, retry, relay answers or
// write error bodies: each front door reads its own wire (an HTTP body, an
// ext_proc stream), moves the bytes or lets a gateway move them, and writes
// an Error in its own protocol's shape. Routing itself is package route's;
// the pipeline hands it the prepared request and maps its refusals.
package pipeline

// GroupHeader names the caller's routing group.
const GroupHeader = "X-Prefixgate-Group"

// Response headers that say where a request went.
const (
	BackendHeader  = "X-Prefixgate-Backend"
	DecisionHeader = "X-Prefixgate-Decision"
	KeyHeader      = "X-Prefixgate-Key"
)
