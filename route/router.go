package route

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Target is what the router needs of a member, supplied by whoever owns
// the member (the backend pool): the router reads these facts from the
// member itself and keeps no copy of them, so they have one owner. Name and
// Models must not change while the member is in the set (the owner hands
// over a new set when they do); Healthy may change at any time, and the
// owner calls Refresh after it does so that candidate counts follow.
type Target interface {
	// ID is the member's name: unique, stable, it seeds its ring positions.
	ID() string
	// Models lists the models and LoRA adapters it serves; empty serves all.
	Models() []string
	// Healthy reports whether it takes new requests (not ejected, not
	// draining). Members that are not healthy keep their ring positions.
	Healthy() bool
	// CacheTokens is its prefix-cache capacity in tokens as its engine
	// states it; 0 when unknown (Config.DefaultCacheTokens).
	CacheTokens() int
}

// Observer is implemented by targets whose owner judges their health from
// what became of the requests sent to them (passive health checking, like
// grpc-go's outlier detection fed by balancer.DoneInfo). The first DoneWith
// of each pick calls Observe once with the outcome's Err and Status, after
// the pick's slot is released; the owner decides what they mean (an
// unreachable backend, a 5xx, a stalled stream, a client that left) and
// whether to eject, then tells the router with Refresh. Observe must not
// block: it runs on the request's goroutine.
type Observer interface {
	Observe(err error, status int)
}

// thresholder is implemented by targets with a concurrency threshold of
// their own (1..MaxThreshold; 0 means Config.DefaultThreshold).
type thresholder interface{ Threshold() int }

// Member is a static member: a Target that is always healthy, for callers
// with no health to report (simulators, tests, a fixed fleet).
type Member struct {
	// Name identifies the member and seeds its ring positions; unique.
	Name string
	// Models lists the models and LoRA adapters it serves; empty serves all.
	Models []string
	// Threshold is its concurrency threshold (1..1024); 0 means
	// Config.DefaultThreshold.
	Threshold int
	// CacheTokens is the member's prefix-cache capacity in tokens as its
	// engine states it (for vLLM num_gpu_blocks × block_size); the
	// prefix-index policy remembers about that much of what it sent there.
	// 0 when unknown: Config.DefaultCacheTokens.
	CacheTokens int
}

// staticMember is a Member as a Target.
type staticMember struct{ m Member }

func (s *staticMember) ID() string       { return s.m.Name }
func (s *staticMember) Models() []string { return s.m.Models }
func (s *staticMember) Healthy() bool    { return true }
func (s *staticMember) CacheTokens() int { return s.m.CacheTokens }
func (s *staticMember) Threshold() int   { return s.m.Threshold }

// memberState is what outlives snapshots: a member keeps its counters
// across SetTargets and Reconfigure, and a Decision keeps the state it charged even
// after the member is removed, so its Done still releases the right counter.
type memberState struct {
	inflight atomic.Int64
	// hint is the load other routers put on the member, as of the last
	// SetLoadHint: the reported load minus this router's in-flight count at
	// that moment, never negative. The bound and threshold are checked
	// against inflight + hint.
	hint atomic.Int64
	// prefill is the prompt tokens charged to the member by prefix-index
	// picks whose first byte has not come back yet: queued prefill work.
	prefill atomic.Int64
	// done counts this router's requests on the member that have
	// finished, ever: the completions between a scrape and its hint.
	done atomic.Int64
	// id is the member's stable small number (index bitsets, Decision
	// slots); it lasts as long as the state, across SetTargets.
	id int32
	_  [32]byte // keep hot counters of different members off one cache line
}

// load is what the member holds as far as this router knows: its own
// requests plus the hinted ones of other routers.
func (st *memberState) load() int64 { return st.inflight.Load() + st.hint.Load() }

// memberView is a member as one snapshot sees it.
type memberView struct {
	t         Target
	name      string
	models    []string
	threshold int64
	st        *memberState
}

func (m *memberView) serves(model string) bool {
	return model == "" || len(m.models) == 0 || slices.Contains(m.models, model)
}

// snapshot is immutable once published. Refresh publishes a copy that
// shares the ring and members and carries new candidate counts; Reconfigure
// one with new settings and a new policy over the same members.
type snapshot struct {
	cfg     *Config
	policy  policy
	ring    *ring
	members []memberView // sorted by name; ring owner indices point here
	byName  map[string]int32
	healthy int            // healthy members
	wild    int            // healthy members with no model list (serve all)
	byModel map[string]int // healthy members listing the model
}

// candidates is n for a request's model: healthy members that serve it.
func (s *snapshot) candidates(model string) int {
	if model == "" {
		return s.healthy
	}
	return s.wild + s.byModel[model]
}

func (s *snapshot) recount() {
	s.healthy, s.wild = 0, 0
	s.byModel = make(map[string]int)
	for i := range s.members {
		m := &s.members[i]
		if !m.t.Healthy() {
			continue
		}
		s.healthy++
		if len(m.models) == 0 {
			s.wild++
		}
		for _, model := range m.models {
			s.byModel[model]++
		}
	}
}

// Router picks backends for requests. It is safe for concurrent use; picks
// never block on writers.
type Router struct {
	snap atomic.Pointer[snapshot]
	_    [56]byte
	// total counts requests in flight on all members, including members since
	// removed, plus picks between reservation and commit (see acquire).
	total atomic.Int64
	// hints is the sum of the members' hints (other routers' requests), added
	// to total for the bound.
	hints atomic.Int64
	_     [48]byte
	rng   atomic.Uint64
	_     [56]byte
	// waiters counts Picks in the queue; Done wakes them only when non-zero.
	waiters atomic.Int64
	wake    atomic.Pointer[chan struct{}]

	mu      sync.Mutex // serializes writers (SetTargets, Refresh, Reconfigure)
	states  map[string]*memberState
	freeIDs []int32 // ids of forgotten states, reused lowest first
	nextID  int32
	// mispredicted sums the index mispredictions of policies replaced by
	// Reconfigure, so that IndexStats never goes back.
	mispredicted uint64
}

func (r *Router) newID() int32 {
	if k := len(r.freeIDs); k > 0 {
		slices.Sort(r.freeIDs)
		id := r.freeIDs[0]
		r.freeIDs = r.freeIDs[1:]
		return id
	}
	r.nextID++
	return r.nextID - 1
}

// New returns a Router for members under cfg, or an error naming the invalid
// Config or Member field.
func New(cfg Config, members []Member) (*Router, error) {
	return NewTargets(cfg, staticTargets(members))
}

// NewTargets returns a Router over members supplied by their owner, or an
// error naming the invalid Config or member field.
func NewTargets(cfg Config, members []Target) (*Router, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Router{states: make(map[string]*memberState)}
	r.snap.Store(&snapshot{cfg: &cfg, policy: policies[cfg.Policy].build(cfg), ring: buildRing(nil, cfg.VirtualNodes), byName: map[string]int32{}, byModel: map[string]int{}})
	seed := cfg.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	r.rng.Store(seed)
	ch := make(chan struct{})
	r.wake.Store(&ch)
	if err := r.SetTargets(members); err != nil {
		return nil, err
	}
	return r, nil
}

func staticTargets(members []Member) []Target {
	ts := make([]Target, len(members))
	for i := range members {
		ts[i] = &staticMember{m: members[i]}
	}
	return ts
}

// Config returns the configuration in force, defaults filled in.
func (r *Router) Config() Config { return *r.snap.Load().cfg }

// NeedsBlocks reports whether the policy in force reads Request.Blocks and
// PromptTokens; for any other, a caller need not hash the prompt.
func (r *Router) NeedsBlocks() bool {
	_, ok := r.snap.Load().policy.(blockReader)
	return ok
}

// LearnsPlacements reports whether the policy in force remembers where its
// picks sent each prompt and follows that later: a caller that may discard
// a pick (its member not allowed after all) should ask Explain first, since
// a discarded pick is still remembered.
func (r *Router) LearnsPlacements() bool {
	_, ok := r.snap.Load().policy.(placementLearner)
	return ok
}

// PlacesByKey reports whether the policy in force sends each request to
// its key's home (Home) unless the home is over a bound, so that a change
// of members moves only the keys of the members added or removed.
func (r *Router) PlacesByKey() bool {
	_, ok := r.snap.Load().policy.(keyPlacer)
	return ok
}

// IndexStats reports the prefix index; ok is false when the policy keeps
// none.
func (r *Router) IndexStats() (stats IndexStats, ok bool) {
	// r.mu orders this against Reconfigure, which moves the count of a
	// replaced index into r.mispredicted.
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.snap.Load()
	p, ok := s.policy.(statsReporter)
	if !ok {
		// Mispredictions of an index replaced by Reconfigure still count.
		return IndexStats{Mispredictions: r.mispredicted}, false
	}
	stats = p.indexStats(s.members)
	stats.Mispredictions += r.mispredicted
	return stats, true
}

// Reconfigure changes the settings in place: members, their in-flight
// counts and load hints stay, requests in flight are released against the
// same counters, and picks from now on use cfg. A change of policy (or of
// any setting, for prefix-index) starts a fresh policy state. An invalid cfg
// is an error naming the field, and nothing changes.
func (r *Router) Reconfigure(cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if cfg == *old.cfg {
		return nil
	}
	if p, ok := old.policy.(statsReporter); ok {
		r.mispredicted += p.mispredictions()
	}
	targets := make([]Target, len(old.members))
	for i := range old.members {
		targets[i] = old.members[i].t
	}
	return r.publish(&cfg, policies[cfg.Policy].build(cfg), targets)
}

// SetMembers replaces the member set with static members (see SetTargets).
func (r *Router) SetMembers(members []Member) error { return r.SetTargets(staticTargets(members)) }

// SetTargets replaces the member set. Members that stay (by ID) keep their
// in-flight counts. Requests in flight on a removed member are still
// released by their Done. Only the keys of added or removed members move.
func (r *Router) SetTargets(members []Target) error {
	// Writers hold the lock throughout so that concurrent calls publish in
	// the order they validated; picks never take it.
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	return r.publish(old.cfg, old.policy, members)
}

// publish builds and publishes a snapshot of members under cfg and pol
// (r.mu held).
func (r *Router) publish(cfg *Config, pol policy, members []Target) error {
	views := make([]memberView, len(members))
	caches := make(map[string]int, len(members))
	for i, t := range members {
		name, th, cache := t.ID(), 0, t.CacheTokens()
		if name == "" {
			return fmt.Errorf("route: member %d: Name is empty", i)
		}
		if tt, ok := t.(thresholder); ok {
			th = tt.Threshold()
		}
		if th < 0 || th > MaxThreshold {
			return fmt.Errorf("route: member %q: Threshold %d out of range 1..%d (0 = default)", name, th, MaxThreshold)
		}
		if cache < 0 {
			return fmt.Errorf("route: member %q: CacheTokens %d is negative (0 = unknown)", name, cache)
		}
		// An engine may state more than the index will size for.
		caches[name] = min(cache, MaxCacheTokens)
		if th == 0 {
			th = cfg.DefaultThreshold
		}
		views[i] = memberView{t: t, name: name, models: slices.Clone(t.Models()), threshold: int64(th)}
	}
	slices.SortFunc(views, func(a, b memberView) int { return cmp.Compare(a.name, b.name) })
	names := make([]string, len(views))
	for i := range views {
		if i > 0 && views[i].name == views[i-1].name {
			return fmt.Errorf("route: member %q: Name listed twice", views[i].name)
		}
		names[i] = views[i].name
	}
	rg := buildRing(names, cfg.VirtualNodes)
	keeper, _ := pol.(memberKeeper)
	byName := make(map[string]int32, len(views))
	for i := range views {
		st := r.states[views[i].name]
		if st == nil {
			st = &memberState{id: r.newID()}
			r.states[views[i].name] = st
		}
		views[i].st = st
		byName[views[i].name] = int32(i)
		if keeper != nil {
			keeper.setMember(st.id, cmp.Or(caches[views[i].name], cfg.DefaultCacheTokens))
		}
	}
	// Forget removed members once idle; one removed with requests in flight
	// keeps its state so that, if it comes back, its load is still counted.
	// A removed member's hint no longer counts.
	for name, st := range r.states {
		if _, ok := byName[name]; ok {
			continue
		}
		r.hints.Add(-st.hint.Swap(0))
		if st.inflight.Load() == 0 {
			delete(r.states, name)
			if keeper != nil {
				keeper.dropMember(st.id)
			}
			r.freeIDs = append(r.freeIDs, st.id)
		}
	}
	s := &snapshot{cfg: cfg, policy: pol, ring: rg, members: views, byName: byName}
	s.recount()
	r.snap.Store(s)
	r.wakeWaiters()
	return nil
}

// Refresh recounts the candidates after a member's Healthy changed. Picks
// read Healthy live, so a pick never lands on an unhealthy member; Refresh
// keeps the bound's candidate count and the no-candidate answer exact, and
// wakes queued picks when a member returns.
func (r *Router) Refresh() {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := *r.snap.Load()
	s.recount()
	r.snap.Store(&s)
	r.wakeWaiters()
}

// SetLoadHint tells the router how many requests member name holds in
// total, counting every router's (for a vLLM replica: the scraped
// num_requests_running + num_requests_waiting). Until the next hint, the
// member's load is taken as this router's in-flight count plus the
// difference at hint time (never negative), so this router's own picks and
// completions since the hint are still counted exactly and other routers'
// are as of the hint; the bound's total grows by the same difference. With
// several routers in front of one fleet this makes each bound a fleet-wide
// one. A negative load clears the hint (call it when the signal is unknown
// or stale); unknown names are ignored. Without hints a router counts only
// its own requests.
//
// A load read some time before it is set counted requests that may have
// finished since; SetLoadHintSince takes those out.
func (r *Router) SetLoadHint(name string, load int) { r.SetLoadHintSince(name, load, -1) }

// Completed is how many of this router's requests on member name have
// finished, ever (-1 for an unknown name). Read it just before asking the
// member for its load, and pass it with that load to SetLoadHintSince.
func (r *Router) Completed(name string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.states[name]; st != nil {
		return st.done.Load()
	}
	return -1
}

// SetLoadHintSince is SetLoadHint for a load read after Completed returned
// completed: the requests of this router that finished since then are
// taken out of load as well (the engine counted them; this router's
// in-flight count no longer does), so a hint set just after a request
// ended does not count it twice. A negative completed corrects nothing.
func (r *Router) SetLoadHintSince(name string, load int, completed int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.states[name]
	if st == nil {
		return
	}
	if _, ok := r.snap.Load().byName[name]; !ok {
		return
	}
	var extra int64
	if load >= 0 {
		finished := int64(0)
		if completed >= 0 {
			finished = max(0, st.done.Load()-completed)
		}
		extra = max(0, int64(load)-st.inflight.Load()-finished)
	}
	old := st.hint.Swap(extra)
	r.hints.Add(extra - old)
	if extra < old && r.waiters.Load() > 0 {
		r.wakeWaiters()
	}
}

// bound is ceil(c·total/n), or ceil(total/n)+Slack if larger: the most
// requests one candidate may hold once this request (already counted in
// total) is placed.
func (s *snapshot) bound(total int64, n int) int64 {
	if n <= 0 {
		return 0
	}
	b := int64(math.Ceil(s.cfg.LoadFactor * float64(total) / float64(n)))
	if s.cfg.Slack > 0 {
		b = max(b, (total+int64(n)-1)/int64(n)+int64(s.cfg.Slack))
	}
	return b
}

// rand returns a pseudo-random number: splitmix64 over an atomic counter, so
// it is lock-free, and reproducible for a serial caller with a fixed Seed.
func (r *Router) rand() uint64 {
	return splitmix(r.rng.Add(0x9e3779b97f4a7c15))
}

func splitmix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *Router) wakeWaiters() {
	old := r.wake.Load()
	ch := make(chan struct{})
	if r.wake.CompareAndSwap(old, &ch) {
		close(*old)
	}
}
