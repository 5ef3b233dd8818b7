// Package sim is the discrete-event fleet simulator behind `prefixgate sim`.
//
// It runs N simulated vLLM engines (backends/vllmsim.Engine, virtual clock)
// behind the real router (package route, TryPick) and keys every request
// through the real normalizer (package normalize), so the routing keys and
// spill chains it exercises are the ones the server computes. Requests that
// find every candidate saturated wait in a router-side FIFO and are retried
// when one of that router's requests completes.
//
// It owns the synthetic workloads (long-context, sharegpt, multitenant, zipf,
// agent, shared-prefix, multi-turn, and noisy-neighbor, whose requests carry
// flows that the flow-control variants of flows*.go run on), the replay of Mooncake-format traces,
// the peer references of other routers (peer_*.go: SGLang Model Gateway's
// cache_aware, vLLM production-stack's prefixaware, Dynamo's approximate KV
// router, the Gateway API Inference Extension's default scorers) and an
// oracle (prefix-index's cost model and cold-placement rules fed with the
// replicas' true caches), the pooled-cache upper bound,
// scale events, several independent routers over one fleet, rate sweeps,
// and the reports (table, JSON, SVG charts).
//
// It does not speak HTTP; package loadgen drives live endpoints.
package sim
