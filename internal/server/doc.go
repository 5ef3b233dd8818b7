// Package server wires prefixgate's stages into one HTTP handler: the
// Connect, gRPC and gRPC-Web services, the OpenAI-compatible REST proxy and
// the native /invocations endpoint all run the same pipeline — decode,
// normalize, key, route, forward — and report where each request went.
//
// It owns request limits, error mapping and metrics; the stages themselves
// live in packages normalize, route and backends.
package server
