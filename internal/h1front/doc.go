// Package h1front is the router's HTTP/1.1 front door, the server side of
// the hand-written HTTP/1.1 code. It accepts connections itself: an
// HTTP/1.1 connection whose requests have the plain shape (request.go) is
// served here, one request after another on the connection's goroutine,
// with buffers reused across its requests and no per-request background
// read. The first request that is not plain (h2c's preface, an upgrade, a
// chunked body, an odd header, another path), and every TLS connection,
// hands the connection with the bytes already read to net/http's server
// (Front is the listener it serves, Continued the one for connections
// that have spoken HTTP/1.1 here already), for the rest of its life:
// Connect, gRPC, gRPC-Web and everything unusual keep net/http's
// behaviour.
//
// Its request contexts implement the donehook contract that the backend
// client (backends/internal/h1client) uses to stop a request's I/O.
package h1front
