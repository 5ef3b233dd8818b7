package route

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"time"
)

// Defaults applied by New for zero Config fields.
const (
	// DefaultPolicy is the policy used when Config.Policy is empty.
	DefaultPolicy = "prefix-index"
	// DefaultLoadFactor is c in the bound ceil(c·(total+1)/n).
	DefaultLoadFactor = 1.25
	// DefaultSlack is Config.Slack when it is 0: the bound stays at least 3
	// above the mean in-flight count (see docs/routing.md for the sweep).
	DefaultSlack = 3
	// DefaultIndexSlack is Config.Slack when it is 0 and the policy is
	// prefix-index: its cost model balances work, so the bound only has to
	// stop a hot prefix from piling up, and a tighter one sends requests to
	// cold replicas that pay a full prefill (see docs/routing.md).
	DefaultIndexSlack = 12
	// DefaultVirtualNodes is the number of ring positions per backend. It is
	// the smallest power of two that keeps every backend's share of keys
	// within ±5% of 1/n at 7 backends (see TestBalanceSevenBackends and
	// docs/routing.md for the measurement).
	DefaultVirtualNodes = 4096
	// DefaultThreshold is a backend's concurrency threshold (maximum in
	// flight) when neither Member.Threshold nor Config.DefaultThreshold set it.
	DefaultThreshold = 256
	// DefaultQueueDepth is the number of requests that may wait for capacity.
	DefaultQueueDepth = 256
	// DefaultQueueWait is how long a request waits for capacity.
	DefaultQueueWait = 250 * time.Millisecond

	// DefaultCacheTokens is Config.DefaultCacheTokens when it is 0: a
	// replica's KV cache in tokens when its Member.CacheTokens is not set
	// (about what one 80 GB GPU left for a 70B model's cache holds).
	DefaultCacheTokens = 1 << 20
	// DefaultDecodeWeight is Config.DecodeWeight when it is 0 (see
	// docs/routing.md for the sweep).
	DefaultDecodeWeight = 8
	// MaxCacheTokens bounds Member.CacheTokens and Config.DefaultCacheTokens
	// (the index allocates up to CacheTokens/IndexBlockTokens ring slots).
	MaxCacheTokens = 1 << 28

	// MaxThreshold is the largest allowed concurrency threshold.
	MaxThreshold = 1024
	// MaxVirtualNodes is the largest allowed Config.VirtualNodes.
	MaxVirtualNodes = 1 << 16
)

// Config configures a Router. The zero value is valid and means defaults.
type Config struct {
	// Policy names the routing policy: "prefix-index" (default),
	// "prefix-aware", "least-outstanding", "random" or "consistent-hash".
	// See Policies.
	Policy string
	// LoadFactor is c in the load bound ceil(c·(total+1)/n); 0 means
	// DefaultLoadFactor. It must be at least 1.
	LoadFactor float64
	// Slack keeps the bound at least Slack above the mean: the limit is
	// max(ceil(c·(total+1)/n), ceil((total+1)/n) + Slack). The load factor
	// alone leaves almost no room when few requests are in flight
	// (ceil(1.25·2) = 3 over a mean of 2), so a home spills on ordinary
	// fluctuation; with Slack it does not until it holds Slack more than the
	// mean. At high load (mean ≥ Slack/(c−1)) the load factor governs and
	// Slack changes nothing. 0 means DefaultSlack (3), for prefix-index
	// DefaultIndexSlack (12); negative means none
	// (the plain ceil(c·(total+1)/n)).
	Slack int
	// VirtualNodes is the number of ring positions per backend; 0 means
	// DefaultVirtualNodes. Changing it moves keys.
	VirtualNodes int
	// DefaultThreshold is the concurrency threshold for members whose
	// Threshold is 0; 0 means DefaultThreshold. Range 1..MaxThreshold.
	DefaultThreshold int
	// QueueDepth is how many Pick calls may wait for capacity at once; 0
	// means DefaultQueueDepth, negative disables waiting (saturation fails
	// at once).
	QueueDepth int
	// QueueWait is the longest a Pick waits for capacity; 0 means
	// DefaultQueueWait, negative disables waiting.
	QueueWait time.Duration
	// DisableSpillChain makes prefix-aware skip Request.SpillKeys and walk
	// clockwise from the key's home at once (for measuring the chain's gain).
	DisableSpillChain bool
	// DefaultCacheTokens is the KV cache size, in tokens, of members whose
	// CacheTokens is 0 (prefix-index); 0 means DefaultCacheTokens.
	DefaultCacheTokens int
	// DecodeWeight is what prefix-index charges, in prompt tokens of
	// prefill work, for each request a candidate holds (its decode slows
	// every step); 0 means DefaultDecodeWeight, negative means 0.
	DecodeWeight int
	// SplitInterference, SplitTransferWeight and SplitMinTokens are the
	// cost model of the prefill/decode split decision (SplitCost.Split): 0
	// means DefaultSplitInterference, DefaultSplitTransferWeight and
	// DefaultSplitMinTokens; negative means 0.
	SplitInterference   float64
	SplitTransferWeight float64
	SplitMinTokens      int
	// Seed seeds the random tie-breaks of the random and least-outstanding
	// policies; 0 seeds from the clock.
	Seed uint64
}

// Validate reports the first invalid field of c, its message starting
// with the field's name (LoadFactor: ...).
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults validates c and returns it with zero fields filled in.
func (c Config) withDefaults() (Config, error) {
	c.Policy = cmp.Or(c.Policy, DefaultPolicy)
	if _, ok := policies[c.Policy]; !ok {
		return c, fmt.Errorf("Policy: %q is not a routing policy (have %s)", c.Policy, strings.Join(Policies(), ", "))
	}
	c.LoadFactor = cmp.Or(c.LoadFactor, DefaultLoadFactor)
	if math.IsNaN(c.LoadFactor) || math.IsInf(c.LoadFactor, 0) || c.LoadFactor < 1 {
		return c, fmt.Errorf("LoadFactor: %v is below 1", c.LoadFactor)
	}
	if c.Slack == 0 {
		c.Slack = cmp.Or(policies[c.Policy].slack, DefaultSlack)
	}
	if c.Slack > MaxThreshold {
		return c, fmt.Errorf("Slack: %d is above %d", c.Slack, MaxThreshold)
	}
	c.VirtualNodes = cmp.Or(c.VirtualNodes, DefaultVirtualNodes)
	if c.VirtualNodes < 1 || c.VirtualNodes > MaxVirtualNodes {
		return c, fmt.Errorf("VirtualNodes: %d is outside 1..%d", c.VirtualNodes, MaxVirtualNodes)
	}
	c.DefaultThreshold = cmp.Or(c.DefaultThreshold, DefaultThreshold)
	if c.DefaultThreshold < 1 || c.DefaultThreshold > MaxThreshold {
		return c, fmt.Errorf("DefaultThreshold: %d is outside 1..%d", c.DefaultThreshold, MaxThreshold)
	}
	c.DefaultCacheTokens = cmp.Or(c.DefaultCacheTokens, DefaultCacheTokens)
	if c.DefaultCacheTokens < 0 || c.DefaultCacheTokens > MaxCacheTokens {
		return c, fmt.Errorf("DefaultCacheTokens: %d is outside 1..%d (0 = default)", c.DefaultCacheTokens, MaxCacheTokens)
	}
	c.DecodeWeight = cmp.Or(c.DecodeWeight, DefaultDecodeWeight)
	if err := c.validateSplit(); err != nil {
		return c, err
	}
	c.QueueDepth = cmp.Or(c.QueueDepth, DefaultQueueDepth)
	c.QueueWait = cmp.Or(c.QueueWait, DefaultQueueWait)
	return c, nil
}
