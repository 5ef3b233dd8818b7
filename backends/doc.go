// Package backends owns everything between a routing decision and the replica
// that answers: the pool of OpenAI-compatible backends (vLLM or any other),
// their identities, health (active probes and passive ejection), the models
// and LoRA adapters each serves, and forwarding a request to one of them over
// pooled keep-alive connections.
//
// It does not decide which backend serves a request (package route does) and
// it does not read or rewrite request bodies (package normalize does).
// Package backends/vllmsim is a simulated vLLM used by the demo and tests.
package backends
