// Package flowgate is flow control in front of the router, for every front
// door (serve's HTTP, gRPC and Connect; epp's ext_proc): it identifies a
// request's flow from the tenant, the fairness and objective headers or
// the group; lets it through at once when the fleet is not saturated and
// nobody of its model waits; else queues it (package flowcontrol orders
// the queue) until a dispatcher goroutine finds a backend that can take
// it and only then asks the router to pick (late binding), or refuses it
// with a 429 carrying Retry-After. It learns each engine's capacity from
// its scraped signals, keeps headroom for higher bands, and counts
// Prometheus metrics per band and flow with a bounded number of flow
// labels.
//
// Reconfigure applies a new configuration to a running gate: requests
// already queued stay queued under it and are served.
//
// It knows no HTTP server or ext_proc stream: callers pass the headers
// (Headers), the route request and the body's size, and call Charge with
// the answer's output tokens.
package flowgate
