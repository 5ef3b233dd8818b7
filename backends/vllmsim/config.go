package vllmsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config configures live replicas (NewReplica, StartFleet).
type Config struct {
	// Preset names the engine model (see Presets); "" means DefaultPreset.
	Preset string
	// Model is the served base model name; "" means the preset's.
	Model string
	// Engine overrides the preset: every non-zero field replaces the
	// preset's value.
	Engine EngineConfig
	// Speed runs the engine's clock this many times faster than the wall
	// clock; 0 means 1. Reported times (metrics, TTFT) are engine times.
	Speed float64
	// Adapters are LoRA adapters loaded at start, each "name" or
	// "name=path".
	Adapters []string
	// DefaultMaxTokens is the output length when a request sets none;
	// 0 means 16.
	DefaultMaxTokens int
	// ResponsesStoreSize bounds the responses a replica keeps for
	// previous_response_id and GET /v1/responses/{id}, least recently used
	// evicted first; 0 means DefaultResponsesStoreSize.
	ResponsesStoreSize int
	// Faults are injected from the start; POST /admin/faults changes them.
	Faults Faults
	// Role is the replica's part in a disaggregated fleet: prefill, decode
	// or both ("" is both); see pd_http.go.
	Role string
	// KVLoadFailure is what a decode worker does when it cannot read a
	// vLLM transfer: recompute the prompt (the default, "") or fail.
	KVLoadFailure string
	// Seed seeds the fault injection's random numbers and response ids.
	Seed uint64
	// Name prefixes replica names: StartFleet names replicas Name-0,
	// Name-1, ...; "" means "vllmsim".
	Name string
}

// resolved returns cfg with the preset applied and defaults filled in.
func (cfg Config) resolved() (Config, error) {
	p, err := LookupPreset(cfg.Preset)
	if err != nil {
		return cfg, err
	}
	cfg.Preset = p.Name
	if cfg.Model == "" {
		cfg.Model = p.Model
	}
	e, o := p.Engine, cfg.Engine
	if o.MaxNumSeqs != 0 {
		e.MaxNumSeqs = o.MaxNumSeqs
	}
	if o.CacheBlocks != 0 {
		e.CacheBlocks = o.CacheBlocks
	}
	if o.MaxModelLen != 0 {
		e.MaxModelLen = o.MaxModelLen
	}
	if o.PrefillTokensPerSec != 0 {
		e.PrefillTokensPerSec = o.PrefillTokensPerSec
	}
	if o.DecodeStepBase != 0 {
		e.DecodeStepBase = o.DecodeStepBase
	}
	if o.DecodeStepPerSeq != 0 {
		e.DecodeStepPerSeq = o.DecodeStepPerSeq
	}
	if o.PrefillOverhead != 0 {
		e.PrefillOverhead = o.PrefillOverhead
	}
	e.mergeTransfer(o)
	if o.SchedulingPolicy != "" {
		e.SchedulingPolicy = o.SchedulingPolicy
	}
	if err := e.validate(); err != nil {
		return cfg, err
	}
	cfg.Engine = e
	if cfg.Speed == 0 {
		cfg.Speed = 1
	}
	if !(cfg.Speed > 0) {
		return cfg, errors.New("vllmsim: Speed must be positive")
	}
	if cfg.DefaultMaxTokens <= 0 {
		cfg.DefaultMaxTokens = 16
	}
	if cfg.ResponsesStoreSize == 0 {
		cfg.ResponsesStoreSize = DefaultResponsesStoreSize
	}
	if cfg.ResponsesStoreSize < 0 {
		return cfg, errors.New("vllmsim: ResponsesStoreSize must not be negative")
	}
	if cfg.Name == "" {
		cfg.Name = "vllmsim"
	}
	if cfg.Role, err = checkRole(cfg.Role); err != nil {
		return cfg, err
	}
	if cfg.KVLoadFailure, err = checkKVLoadFailure(cfg.KVLoadFailure); err != nil {
		return cfg, err
	}
	for _, a := range cfg.Adapters {
		if name, _, _ := strings.Cut(a, "="); name == "" || name == cfg.Model {
			return cfg, fmt.Errorf("vllmsim: bad adapter %q", a)
		}
	}
	if err := cfg.Faults.validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// Faults are injected failures. Rates are probabilities per request in
// [0, 1]. ErrorRate, LatencySpikeRate apply to the generation endpoints;
// Hang, CloseConnection and Crash to every endpoint except /admin/faults.
type Faults struct {
	// ErrorRate answers this fraction of generation requests with a 500.
	ErrorRate float64 `json:"error_rate"`
	// LatencySpikeRate delays this fraction of generation requests by
	// LatencySpike (wall time, not scaled by Speed) before they start.
	LatencySpikeRate float64  `json:"latency_spike_rate"`
	LatencySpike     Duration `json:"latency_spike"`
	// Hang makes requests never answer until the client gives up.
	Hang bool `json:"hang"`
	// CloseConnection closes each request's connection without an answer.
	CloseConnection bool `json:"close_connection"`
	// Crash stops the replica: its listener closes and open connections
	// are dropped. Replica.Restart brings it back with an empty cache.
	Crash bool `json:"crash"`
}

func (f Faults) validate() error {
	if f.ErrorRate < 0 || f.ErrorRate > 1 || f.LatencySpikeRate < 0 || f.LatencySpikeRate > 1 {
		return errors.New("vllmsim: fault rates must be within [0, 1]")
	}
	if f.LatencySpike < 0 {
		return errors.New("vllmsim: latency_spike must not be negative")
	}
	return nil
}

// Duration is a time.Duration that reads from JSON either as a Go duration
// string ("250ms") or as a number of seconds, and writes as a string.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New("duration must be a string like \"250ms\" or a number of seconds")
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// CheckConfig reports whether cfg is valid (its preset exists, the engine
// model it yields is sane, rates are in range) without starting anything.
func CheckConfig(cfg Config) error {
	_, err := cfg.resolved()
	return err
}
