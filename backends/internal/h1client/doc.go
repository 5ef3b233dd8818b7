// Package h1client is the backend side of the hand-written HTTP/1.1 code:
// the client that forwards the router's requests to http:// backends over
// keep-alive connections, doing each exchange on the caller's goroutine
// (Transport), with a fast parser for the plain answers vLLM and its
// peers send (response.go) and net/http's Transport as the fallback for
// everything else.
//
// A request is sent again on a new connection only when it provably never
// reached the backend: the reused connection was found closed before a
// byte was written, or the write failed with no byte of the request
// accepted. An LLM request is not idempotent, so one that may have
// reached the backend is never sent twice.
//
// A request's context that implements donehook.Context (the front door's)
// takes the connection's expiry itself; any other goes through
// context.AfterFunc.
package h1client
