package flowcontrol

import (
	"cmp"
	"fmt"
	"time"
)

// Defaults of Thresholds.
const (
	// DefaultMaxWaiting: an engine reporting more waiting requests than
	// this is full. A scrape can catch a request between its arrival and
	// the engine's next scheduling step, so 0 would see queueing that is
	// not there.
	DefaultMaxWaiting = 2
	// DefaultMaxKVUtil: an engine whose KV cache is this full or fuller
	// is full (near it, vLLM preempts running requests).
	DefaultMaxKVUtil = 0.95
	// DefaultMaxSignalAge: engine signals older than this are stale, and
	// a member with stale signals is full (three scrapes at the pool's
	// default two-second interval, plus one).
	DefaultMaxSignalAge = 7 * time.Second
)

// Thresholds say when a member is full. The zero value means the
// defaults; Validate fills them.
type Thresholds struct {
	// MaxWaiting is the most waiting requests an engine may report and
	// still take work; -1 ignores the signal.
	MaxWaiting int
	// MaxKVUtil is the KV-cache utilization (0..1] at which an engine is
	// full; above 1 ignores the signal.
	MaxKVUtil float64
	// MaxSignalAge is how old scraped signals may be.
	MaxSignalAge time.Duration
}

// Validate returns t with defaults filled, or an error naming the field.
func (t Thresholds) Validate() (Thresholds, error) {
	if t.MaxWaiting < -1 {
		return t, fmt.Errorf("flow_control.max_waiting: %d is below -1", t.MaxWaiting)
	}
	if !(t.MaxKVUtil >= 0 && t.MaxKVUtil <= 2) {
		return t, fmt.Errorf("flow_control.max_kv_utilization: %v is outside 0..2", t.MaxKVUtil)
	}
	if t.MaxSignalAge < 0 {
		return t, fmt.Errorf("flow_control.max_signal_age: %v is negative", t.MaxSignalAge)
	}
	t.MaxWaiting = cmp.Or(t.MaxWaiting, DefaultMaxWaiting)
	t.MaxKVUtil = cmp.Or(t.MaxKVUtil, DefaultMaxKVUtil)
	t.MaxSignalAge = cmp.Or(t.MaxSignalAge, DefaultMaxSignalAge)
	return t, nil
}

// DefaultThresholds are the defaults.
func DefaultThresholds() Thresholds {
	t, _ := Thresholds{}.Validate()
	return t
}

// Engine is what a member's engine said at its last scrape.
type Engine struct {
	// Known is true when there are scraped signals; a member without
	// them is judged on prefixgate's own signals alone.
	Known bool
	// Age is the time since the scrape.
	Age time.Duration
	// Waiting is the engine's queued requests at the scrape.
	Waiting int
	// KVUtil is the KV cache's fill at the scrape, 0..1.
	KVUtil float64
}

// Member is what is known of one candidate replica.
type Member struct {
	// InFlight is prefixgate's requests in flight to the member.
	InFlight int
	// Limit is the member's in-flight bound; 0 means none.
	Limit int
	// QueuedTokens is the predicted prefill work queued on the member.
	QueuedTokens int
	// TokenLimit bounds QueuedTokens; 0 means none.
	TokenLimit int
	// Engine is the scraped signals.
	Engine Engine
}

// Verdict is why a member is full, or Free.
type Verdict uint8

// Verdicts.
const (
	Free         Verdict = iota
	FullInFlight         // InFlight >= Limit
	FullWork             // QueuedTokens >= TokenLimit
	FullWaiting          // the engine queues more than MaxWaiting
	FullKV               // the engine's KV cache is at MaxKVUtil
	FullStale            // the engine's signals are older than MaxSignalAge
)

var verdictNames = [...]string{"free", "in_flight", "queued_work", "engine_waiting", "kv_cache", "stale_signals"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Judge says whether m can take a request without it queueing in the
// engine, under t (already validated). It is a pure function.
func Judge(m Member, t Thresholds) Verdict {
	switch {
	case m.Limit > 0 && m.InFlight >= m.Limit:
		return FullInFlight
	case m.TokenLimit > 0 && m.QueuedTokens >= m.TokenLimit:
		return FullWork
	case !m.Engine.Known:
		return Free
	case m.Engine.Age > t.MaxSignalAge:
		return FullStale
	case t.MaxWaiting >= 0 && m.Engine.Waiting > t.MaxWaiting:
		return FullWaiting
	case m.Engine.KVUtil >= t.MaxKVUtil:
		return FullKV
	}
	return Free
}

// Saturated reports whether no member of ms can take a request (true for
// an empty ms).
func Saturated(ms []Member, t Thresholds) bool {
	for i := range ms {
		if Judge(ms[i], t) == Free {
			return false
		}
	}
	return true
}
