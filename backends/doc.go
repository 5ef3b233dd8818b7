// Package backends owns everything between a routing decision and the replica
// that answers: the pool of OpenAI-compatible backends (vLLM, SGLang,
// llama.cpp or any other),
// their discovery and identities, health, load signals, the models and LoRA
// adapters each serves, and forwarding a request to one of them.
//
// Discovery: a backend spec is a URL (or bare host:port), dns://host:port
// (one backend per A/AAAA address, named ip:port), srv://_service._proto.name
// (one per SRV record, named target:port) or file:///path (a watched list).
// DNS and files are re-read every DiscoveryInterval; backends that stay keep
// their *Backend and state, removed ones finish what they have, and
// OnMembership reports each new list. A backend's Name is its ring member
// name.
//
// Health: a backend is healthy, ejected or draining (State). Active /health
// probes and request outcomes (Backend.Observe, which the router's
// DoneWith calls once per request) eject after FailThreshold consecutive
// failures, an unreachable backend at once;
// an ejected backend is held out for an exponential backoff and then needs
// RiseThreshold consecutive good probes. Drain takes a backend out of the
// candidate set while its requests finish. OnState and OnHealth report
// changes; the backend stays on the ring.
//
// Engines: each backend is vLLM, SGLang or llama.cpp's llama-server (Engine),
// named by an ENGINE+ prefix on its spec or detected from the metric names
// on /metrics, /props or /get_server_info. The engine's profile says where
// its load, KV-cache capacity (Backend.CacheTokens) and per-answer cached
// tokens (Backend.ParseUsage, EventUsage) are.
//
// Load: /metrics is scraped every ScrapeInterval for the engine's queue,
// KV-cache and prefix-cache metrics (Backend.Load). A backend without them
// is served all the same, its load flagged unknown.
//
// Forwarding: pooled keep-alive connections over HTTP/1.1 or h2c, with
// connect, first-byte and idle-stream timeouts. Forward returns
// *UnreachableError only when nothing came back, the one case in which the
// caller may retry the request on another backend.
//
// It does not decide which backend serves a request (package route does) and
// it does not read or rewrite request bodies (package normalize does).
// Package backends/vllmsim is a simulated vLLM used by the demo and tests.
package backends
