// Package layering holds no code, only the test that keeps prefixgate's
// import graph in the shape the design gives it: the normalizer and the Go
// SDK carry no HTTP, compression or RPC library, route knows nothing of
// JSON bodies or HTTP, backends knows nothing of route or normalize, the
// request pipeline knows no front door, and the endpoint picker runs the
// pipeline without the HTTP server.
package layering
