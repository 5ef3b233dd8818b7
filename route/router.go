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

// Member is one backend replica as configured.
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

// memberState is what outlives snapshots: a member keeps its counter and
// health across SetMembers, and a Decision keeps the state it charged even
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
	health  atomic.Int32
	// id is the member's stable small number (index bitsets, Decision
	// slots); it lasts as long as the state, across SetMembers.
	id int32
	_  [32]byte // keep hot counters of different members off one cache line
}

// load is what the member holds as far as this router knows: its own
// requests plus the hinted ones of other routers.
func (st *memberState) load() int64 { return st.inflight.Load() + st.hint.Load() }

// memberView is a member as one snapshot sees it.
type memberView struct {
	name      string
	models    []string
	threshold int64
	st        *memberState
}

func (m *memberView) serves(model string) bool {
	if model == "" || len(m.models) == 0 {
		return true
	}
	for _, s := range m.models {
		if s == model {
			return true
		}
	}
	return false
}

// snapshot is immutable once published. SetHealth publishes a copy that
// shares the ring and members and carries new candidate counts.
type snapshot struct {
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
		if Health(m.st.health.Load()) != HealthHealthy {
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
	cfg    Config
	policy policy

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

	mu      sync.Mutex // serializes writers (SetMembers, SetHealth)
	states  map[string]*memberState
	freeIDs []int32 // ids of forgotten states, reused lowest first
	nextID  int32
}

// indexed is implemented by policies that keep per-member state keyed by
// memberState.id; SetMembers tells them sizes and forgotten ids (under r.mu).
type indexed interface {
	setMember(id int32, cacheTokens int)
	dropMember(id int32)
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
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Router{
		cfg:    cfg,
		policy: policies[cfg.Policy](cfg),
		states: make(map[string]*memberState),
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	r.rng.Store(seed)
	ch := make(chan struct{})
	r.wake.Store(&ch)
	if err := r.SetMembers(members); err != nil {
		return nil, err
	}
	return r, nil
}

// Config returns the configuration in force, defaults filled in.
func (r *Router) Config() Config { return r.cfg }

// SetMembers replaces the member set. Members that stay keep their in-flight
// counts and health; new members start healthy. Requests in flight on a
// removed member are still released by their Done. Only the keys of added or
// removed members move.
func (r *Router) SetMembers(members []Member) error {
	// Writers hold the lock throughout so that concurrent calls publish in
	// the order they validated; picks never take it.
	r.mu.Lock()
	defer r.mu.Unlock()
	views := make([]memberView, len(members))
	caches := make(map[string]int, len(members))
	for i, m := range members {
		if m.Name == "" {
			return fmt.Errorf("route: member %d: Name is empty", i)
		}
		if m.Threshold < 0 || m.Threshold > MaxThreshold {
			return fmt.Errorf("route: member %q: Threshold %d out of range 1..%d (0 = default)", m.Name, m.Threshold, MaxThreshold)
		}
		if m.CacheTokens < 0 {
			return fmt.Errorf("route: member %q: CacheTokens %d is negative (0 = unknown)", m.Name, m.CacheTokens)
		}
		// An engine may state more than the index will size for.
		caches[m.Name] = min(m.CacheTokens, MaxCacheTokens)
		th := m.Threshold
		if th == 0 {
			th = r.cfg.DefaultThreshold
		}
		views[i] = memberView{name: m.Name, models: slices.Clone(m.Models), threshold: int64(th)}
	}
	slices.SortFunc(views, func(a, b memberView) int { return cmp.Compare(a.name, b.name) })
	names := make([]string, len(views))
	for i := range views {
		if i > 0 && views[i].name == views[i-1].name {
			return fmt.Errorf("route: member %q: Name listed twice", views[i].name)
		}
		names[i] = views[i].name
	}
	rg := buildRing(names, r.cfg.VirtualNodes)
	byName := make(map[string]int32, len(views))
	for i := range views {
		st := r.states[views[i].name]
		if st == nil {
			st = &memberState{id: r.newID()}
			r.states[views[i].name] = st
		}
		views[i].st = st
		byName[views[i].name] = int32(i)
		if ix, ok := r.policy.(indexed); ok {
			c := caches[views[i].name]
			if c == 0 {
				c = r.cfg.DefaultCacheTokens
			}
			ix.setMember(st.id, c)
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
			if ix, ok := r.policy.(indexed); ok {
				ix.dropMember(st.id)
			}
			r.freeIDs = append(r.freeIDs, st.id)
		}
	}
	s := &snapshot{ring: rg, members: views, byName: byName}
	s.recount()
	r.snap.Store(s)
	r.wakeWaiters()
	return nil
}

// SetHealth sets a member's health. Unknown names are ignored. Ejected and
// draining members keep their ring positions; walks pass over them.
func (r *Router) SetHealth(name string, h Health) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.states[name]
	if st == nil || Health(st.health.Swap(int32(h))) == h {
		return
	}
	old := r.snap.Load()
	s := &snapshot{ring: old.ring, members: old.members, byName: old.byName}
	s.recount()
	r.snap.Store(s)
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
func (r *Router) SetLoadHint(name string, load int) {
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
		extra = max(0, int64(load)-st.inflight.Load())
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
func (r *Router) bound(total int64, n int) int64 {
	if n <= 0 {
		return 0
	}
	b := int64(math.Ceil(r.cfg.LoadFactor * float64(total) / float64(n)))
	if r.cfg.Slack > 0 {
		b = max(b, (total+int64(n)-1)/int64(n)+int64(r.cfg.Slack))
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
