// Package vllmsim simulates vLLM replicas for demos, tests and virtual-time
// fleet simulation. It is "one model, two clocks":
//
//   - Engine is a pure, deterministic model of one vLLM engine with no
//     goroutines and no wall clock: a tokenizer approximation (Tokenize), a
//     block-level prefix cache (16-token blocks, chained block hashes keyed
//     by LoRA adapter and cache_salt, finite capacity, LRU eviction of
//     blocks no running request holds), a running batch of at most
//     MaxNumSeqs requests with a FIFO waiting queue, and a timing model
//     (prefill rate shared by concurrent prefills, decode steps that slow
//     with batch size). Callers drive it with explicit times: Submit,
//     Advance, NextEvent, Cancel.
//   - Replica runs an Engine in wall time (optionally Speed times faster)
//     behind vLLM's OpenAI-compatible HTTP surface: /v1/chat/completions,
//     /v1/completions (plain and SSE streaming), /invocations, /v1/models,
//     /v1/load_lora_adapter, /v1/unload_lora_adapter, /health and /metrics
//     with vLLM's metric names, plus fault injection via /admin/faults.
//   - Fleet starts K independent replicas on consecutive ports.
//
// Presets model real engines (Llama 3.1 8B on one H100, 70B on eight); the
// figures and their derivation are in docs/vllmsim.md.
package vllmsim
