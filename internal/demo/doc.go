// Package demo runs prefixgate's embedded default: a fleet of simulated vLLM
// replicas on loopback, the real router in front of them, and a long-context
// workload sent through real HTTP once per routing policy, each policy
// against a fresh (cold) fleet, so that the policies can be compared.
//
// It owns the workload's shape and the comparison table; the fleet is
// backends/vllmsim and the router is internal/server.
package demo
