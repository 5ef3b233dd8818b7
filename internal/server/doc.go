// Package server wires prefixgate's stages into one HTTP handler: the
// Connect, gRPC and gRPC-Web services, the OpenAI-compatible REST proxy and
// the native /invocations endpoint all run the same request pipeline
// (package pipeline: tenant, decode, normalize, key), then route, forward
// and report where each request went.
//
// It owns reading bodies off the wire, forwarding with retries, relaying
// answers, writing errors in each protocol's shape, and its own metrics; the
// stages themselves live in packages pipeline, normalize, route and
// backends.
package server
