package vllmsim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Preset is a named engine model of a real model on real GPUs. The figures
// and their derivation are in docs/vllmsim.md.
type Preset struct {
	Name   string
	Model  string // served model name
	Engine EngineConfig
}

// Presets are the built-in engine models.
var Presets = []Preset{
	{
		// 1×H100 80GB, bf16, gpu_memory_utilization 0.9. KV: 32 layers ×
		// 8 KV heads × 128 dims × 2 (K,V) × 2 bytes = 128 KiB per token;
		// 55 GiB for KV / 128 KiB = 450,560 tokens = 28,160 blocks.
		Name:  "llama-3.1-8b-h100",
		Model: "meta-llama/Llama-3.1-8B-Instruct",
		Engine: EngineConfig{
			MaxNumSeqs:          256,
			CacheBlocks:         28160,
			MaxModelLen:         131072,
			PrefillTokensPerSec: 20000,
			DecodeStepBase:      6 * time.Millisecond,
			DecodeStepPerSeq:    80 * time.Microsecond,
			// 128 KiB of KV per token read at about 25 GB/s (one 200 Gb/s
			// RDMA NIC, as NIXL drives it).
			TransferTokensPerSec: 200000,
		},
	},
	{
		// 8×H100 80GB, tensor parallel 8, bf16. KV: 80 layers × 8 KV heads ×
		// 128 dims × 2 × 2 bytes = 320 KiB per token (40 KiB per GPU);
		// 52 GiB per GPU for KV / 40 KiB = 1,363,148 tokens = 85,196 blocks.
		Name:  "llama-3.1-70b-8xh100",
		Model: "meta-llama/Llama-3.1-70B-Instruct",
		Engine: EngineConfig{
			MaxNumSeqs:          256,
			CacheBlocks:         85196,
			MaxModelLen:         131072,
			PrefillTokensPerSec: 15000,
			DecodeStepBase:      12 * time.Millisecond,
			DecodeStepPerSeq:    60 * time.Microsecond,
			// 40 KiB of KV per token per GPU, each GPU reading its shard
			// over its own NIC at about 25 GB/s: 600k tokens/s, halved for
			// the layer-by-layer reads' overhead.
			TransferTokensPerSec: 300000,
		},
	},
	{
		// A small, fast engine for tests and demos: a small cache so that
		// eviction is easy to provoke.
		Name:  "tiny",
		Model: "vllmsim/tiny",
		Engine: EngineConfig{
			MaxNumSeqs:          16,
			CacheBlocks:         1024,
			MaxModelLen:         8192,
			PrefillTokensPerSec: 10000,
			DecodeStepBase:      10 * time.Millisecond,
			DecodeStepPerSeq:    100 * time.Microsecond,
			// Fast enough that tests see the transfer, not wait on it.
			TransferTokensPerSec: 100000,
		},
	},
	{
		// The llama.cpp fleet of the end-to-end tests (internal/llamafleet):
		// llama-server with one slot (-np 1) and one thread on a CPU core,
		// serving the tiny random-weight llama model (4 layers, 256 wide,
		// f32 weights, f16 KV: 4 KiB per token). Its prefix cache is the
		// slot's own prompt plus --cache-ram 64 MiB of saved prompts:
		// 16,384 + about 1,300 tokens = 1,105 blocks. Prefill and decode rates
		// were measured on that server; docs/backends.md has the commands.
		Name:  "llamacpp-tiny-cpu",
		Model: "tiny",
		Engine: EngineConfig{
			MaxNumSeqs:          1,
			CacheBlocks:         1105,
			MaxModelLen:         8192,
			PrefillTokensPerSec: 1700,
			DecodeStepBase:      7 * time.Millisecond,
			DecodeStepPerSeq:    0, // one sequence at a time: no batching cost
			// A cache hit (a saved prompt restored from --cache-ram and a
			// 35-token tail) took about 80 ms of prompt time on an idle
			// core, of which the tail at 1,700 tokens/s is 21 ms.
			PrefillOverhead: 60 * time.Millisecond,
		},
	},
}

// DefaultPreset is the preset used when none is named.
const DefaultPreset = "llama-3.1-8b-h100"

// LookupPreset returns the preset with the given name.
func LookupPreset(name string) (Preset, error) {
	if name == "" {
		name = DefaultPreset
	}
	i := slices.IndexFunc(Presets, func(p Preset) bool { return p.Name == name })
	if i < 0 {
		names := make([]string, len(Presets))
		for j, p := range Presets {
			names[j] = p.Name
		}
		return Preset{}, fmt.Errorf("vllmsim: unknown preset %q (have %s)", name, strings.Join(names, ", "))
	}
	return Presets[i], nil
}
