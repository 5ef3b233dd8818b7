// Package flowcontrol decides which waiting request an inference fleet
// serves next when it is saturated, and which it refuses. It is pure and
// deterministic: no goroutines, no clocks, no locks. Time is passed in, so
// the discrete-event simulator (virtual time) and the server (real time)
// run the same code; callers serialize access.
//
// Every request belongs to a Flow: a fairness id (who asks) and a
// priority (how much it matters; negative is sheddable). A Policy, built
// from the flow_control section of the configuration, turns a named
// objective into a priority and holds each tenant to its ceiling.
//
// Queue orders waiting requests:
//   - strict priority across bands (one band per priority, highest first);
//   - within a band, fair across flows by served tokens: each flow has a
//     virtual token counter (Sheng et al., "Fairness in Serving Large
//     Language Models", OSDI 2024) charged PromptWeight per prompt token
//     and 1 per output token, and the backlogged flow with the least
//     counter goes next; a flow that becomes backlogged starts no lower
//     than the least counter of its band (or the band's virtual time), so
//     idle time is not banked, and work served while nobody in the band
//     waits is no debt when contention starts;
//   - first come first served within a flow.
//
// Each band has caps in requests and bytes and a TTL. The number of bands
// (MaxBands) and flows (Config.MaxFlows; the least recently used idle flow
// is forgotten first) is bounded, and every operation is O(log flows) or
// O(bands): backlogged flows sit in a heap per band, items in intrusive
// lists per flow and per band.
//
// Judge and Saturated say whether a member can take a request without it
// queueing in the engine, from prefixgate's own signals and the engine's
// scraped ones; stale scraped signals count as full. Headroom keeps, on
// each member, slots for bands above a request's that asked recently.
// Room puts them together for one member and one request: what the
// engine's scrapes teach of its capacity, slow start while none is known,
// the headroom of active higher bands in requests and in queued prefill;
// the server's gate and the simulator's prefixgate variant both admit by
// it.
//
// # API
//
// Configuration and priorities:
//
//	type Flow struct{ FairnessID string; Priority int }
//	func (f Flow) Sheddable() bool
//	type Config struct{ Objectives map[string]int; Tenants map[string]Tenant; DefaultTenant Tenant;
//	    Bands map[string]BandLimits; BandDefaults BandLimits; MaxFlows int; PromptWeight float64 }
//	type Tenant struct{ Objective, MaxObjective string }
//	type BandLimits struct{ MaxRequests int; MaxBytes int64; TTL time.Duration }
//	func NewPolicy(cfg Config) (*Policy, error)
//	func (p *Policy) Resolve(tenant, objective string) (Resolution, error) // ErrUnknownObjective
//	type Resolution struct{ Priority int; Objective string; Capped bool }
//	func (p *Policy) Band(priority int) BandLimits
//	func (p *Policy) Objectives() []string
//	func (p *Policy) ObjectiveName(priority int) string
//
// The queue (not safe for concurrent use):
//
//	func NewQueue(p *Policy) *Queue
//	type Item struct{ Flow Flow; PromptTokens int; Bytes int64; Value any } // caller-owned
//	func (it *Item) Queued() bool
//	func (it *Item) Enqueued() time.Time
//	func (it *Item) Deadline() time.Time
//	func (q *Queue) Push(it *Item, now time.Time) error // *ShedError (ErrShed)
//	func (q *Queue) Hold(it *Item, now time.Time) error // Push that queues sheddable flows too (pacing)
//	func (q *Queue) OnEvict(fn func(*Item)) // a full band evicts its longest flow's newest item for a shorter flow's arrival
//	func (q *Queue) Peek() *Item
//	func (q *Queue) Pop() *Item // charges it.PromptTokens to its flow
//	func (q *Queue) Remove(it *Item) bool
//	func (q *Queue) Charge(f Flow, promptTokens, outputTokens int)
//	func (q *Queue) Expire(now time.Time, fn func(*Item)) int // Reason TTL
//	func (q *Queue) NextExpiry() (time.Time, bool)
//	func (q *Queue) Len() int
//	func (q *Queue) Flows() int
//	func (q *Queue) BandLen(priority int) (n int, bytes int64)
//	func (q *Queue) Position(it *Item) Position
//	func (q *Queue) Ahead(priority int) int // queued at priority or above
//	func (q *Queue) Served(f Flow) (prompt, output int64, ok bool)
//	func (q *Queue) Counter(f Flow) (float64, bool)
//	type ShedError struct{ Reason Reason; Flow Flow }
//	Reasons: ReasonSheddable, ReasonQueueFull, ReasonQueueBytes, ReasonEvicted, ReasonTTL, ReasonFlows, ReasonBands
//
// Saturation and headroom:
//
//	type Thresholds struct{ MaxWaiting int; MaxKVUtil float64; MaxSignalAge time.Duration }
//	func (t Thresholds) Validate() (Thresholds, error)
//	func DefaultThresholds() Thresholds
//	type Member struct{ InFlight, Limit, QueuedTokens, TokenLimit int; Engine Engine }
//	type Engine struct{ Known bool; Age time.Duration; Waiting int; KVUtil float64 }
//	func Judge(m Member, t Thresholds) Verdict // Free, FullInFlight, FullWork, FullWaiting, FullKV, FullStale
//	func Saturated(ms []Member, t Thresholds) bool
//	type HeadroomConfig struct{ Window time.Duration; Fraction float64 }
//	func NewHeadroom(cfg HeadroomConfig) (*Headroom, error)
//	func (h *Headroom) Saw(priority int, now time.Time)
//	func (h *Headroom) Reserved(priority, limit int, now time.Time) int
//	func (h *Headroom) Admits(priority, inFlight, limit int, now time.Time) bool
//
// Admission, one judgement for the server's gate and the simulator:
//
//	type RoomConfig struct{ Thresholds Thresholds; Headroom HeadroomConfig; PrefillHeadroom, TokenLimit int;
//	    EnginePriority bool; Rescrape time.Duration }
//	type Scrape struct{ Known bool; At time.Time; Running, Waiting int; KVUtil float64; TakesPriority bool }
//	type Load struct{ InFlight, Limit, QueuedTokens int }
//	func NewRoom[K comparable](cfg RoomConfig) (*Room[K], error)
//	func (r *Room[K]) Saw(priority int, now time.Time)
//	func (r *Room[K]) Fit(k K, l Load, s Scrape, priority int, now time.Time) (Fit, bool) // Fits, Paced, Full; rescrape due
//
// A dispatcher's loop: on arrival, Room.Saw; if the queue is empty and a
// member Fits the request, dispatch it and Charge its prompt tokens; else
// Push when every member is Full, Hold when some is only Paced (a
// *ShedError is an answer: 429). Whenever a
// member frees a slot, Peek the head, and Pop it if a member takes it,
// picking the member then (late binding). Charge output tokens as they are
// served, Expire at NextExpiry, and Remove a request whose client left.
package flowcontrol
