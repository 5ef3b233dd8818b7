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
// agent), the replay of Mooncake-format traces, the cache-aware-tree
// reference policy (an approximate per-replica prefix tree with balance
// thresholds, after the SGLang router's description), the pooled-cache upper
// bound, scale events, several independent routers over one fleet, and the
// reports (table, JSON, SVG charts).
//
// It does not speak HTTP; package loadgen drives live endpoints.
package sim
