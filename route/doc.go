// Package route decides which backend replica serves a request.
//
// It owns the consistent-hash ring with bounded loads (Mirrokni, Thorup,
// Zadimoghaddam), the routing policies picked by name (prefix-index, the
// default, with its per-member prefix index and cost model; prefix-aware,
// least-outstanding, random, and the consistent-hash reference), the spill
// chain for hot prefixes, candidate filtering by health and model/LoRA
// adapter, in-flight accounting, and the bounded wait queue used when every
// candidate is at its concurrency threshold.
//
// A policy says what it needs by the optional interfaces it implements, and
// callers ask the Router, never the policy's name: NeedsBlocks (hash the
// prompt into Request.Blocks), LearnsPlacements (a pick is remembered, so
// dry-run a pick that may be discarded), PlacesByKey (a membership change
// moves only the keys of the members added or removed).
//
// It does not compute routing keys (package normalize does), probe health or
// discover backends (package backends does), or forward requests. Members
// are Targets their owner supplies (SetTargets): the router reads name,
// models, health and cache size from the member itself and owns only what
// routing adds — in-flight counts, load hints and the prefix index — which
// survive membership changes and Reconfigure. The owner calls Refresh when a
// member's health changes.
//
// The read path is lock-free: the Router holds an immutable snapshot (ring,
// members, candidate counts) behind an atomic.Pointer that writers replace.
// A pick allocates nothing and, except with prefix-index (whose index is
// guarded by one mutex, held for the walk of the request's blocks), takes
// no lock; the Decision it returns is a plain value whose Done releases the
// in-flight slot exactly once, however many times (or from however many
// copies) it is called.
//
// See docs/routing.md for the design and docs/benchmarks.md for numbers.
package route
