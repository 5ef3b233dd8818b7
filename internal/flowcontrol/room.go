package flowcontrol

import (
	"fmt"
	"math"
	"time"
)

// DefaultPrefillHeadroom is RoomConfig.PrefillHeadroom's default: while a
// higher band is active, a member with this many prompt tokens of prefill
// queued takes no request of a lower band. Engines share their prefill
// compute among the prompts they prefill at once, so a short
// high-priority prompt beside several long ones waits for all of them;
// about one long prompt at a time keeps the engine's prefill busy and the
// short prompt's share large.
const DefaultPrefillHeadroom = 4096

// DefaultShortShare is RoomConfig.ShortShare's default: one replica in
// eight is kept free of long prompts' prefill while short prompts are
// active.
const DefaultShortShare = 0.125

// MinProbeStep is how many requests past the most it was seen running
// without queueing (more than MaxWaiting) a member whose capacity is not
// known yet may hold before a fresh scrape confirms it runs them (slow
// start): the step is the larger of this and half that most.
const MinProbeStep = 4

// MaxRoomMembers bounds the members whose capacity a Room remembers; past
// it, it forgets them all and learns again.
const MaxRoomMembers = 4096

// Scrape is what a member's engine said at its last scrape.
type Scrape struct {
	// Known is true when the engine publishes load metrics.
	Known bool
	// At is when the scrape finished.
	At time.Time
	// Running and Waiting are the engine's running and queued requests.
	Running, Waiting int
	// KVUtil is the KV cache's fill, 0..1.
	KVUtil float64
	// TakesPriority is true when the engine takes a request's priority in
	// its body (whether it is sent is RoomConfig.EnginePriority).
	TakesPriority bool
}

// Load is the router's own view of a member.
type Load struct {
	// InFlight is the requests on the member, Limit its in-flight bound
	// (0: none).
	InFlight, Limit int
	// QueuedTokens is the prompt tokens of requests on the member whose
	// first token has not come (predicted prefill work).
	QueuedTokens int
}

// RoomConfig says how a Room judges members. The zero value means the
// defaults.
type RoomConfig struct {
	// Thresholds say when an engine is full.
	Thresholds Thresholds
	// Headroom keeps slots for active higher bands.
	Headroom HeadroomConfig
	// PrefillHeadroom: while a band above a request's is active, a member
	// with this many QueuedTokens takes no request of the lower band. 0
	// means DefaultPrefillHeadroom; negative turns it off.
	PrefillHeadroom int
	// ShortShare is the share of the members (rounded down) kept free of
	// long prompts' prefill while short prompts are active: a prompt of
	// PrefillHeadroom tokens or more is held while all but that many
	// members have PrefillHeadroom tokens of prefill queued, so a short
	// prompt always finds a member whose engine is not prefilling a long
	// one. Short prompts are active when one was seen within the headroom
	// window. 0 means DefaultShortShare; negative turns it off (and so
	// does a negative PrefillHeadroom).
	ShortShare float64
	// TokenLimit bounds a member's QueuedTokens (Member.TokenLimit); 0
	// means none.
	TokenLimit int
	// EnginePriority is true when priorities are sent to engines that
	// take them: such an engine runs a request of the highest active band
	// before anything it holds, so its capacity does not hold one back.
	EnginePriority bool
	// Rescrape is the shortest time between two fresh scrapes asked for
	// one member in slow start; 0 turns slow start off (nobody can scrape
	// on demand).
	Rescrape time.Duration
}

// Validate returns c with defaults filled, or an error naming the field.
func (c RoomConfig) Validate() (RoomConfig, error) {
	var err error
	if c.Thresholds, err = c.Thresholds.Validate(); err != nil {
		return c, err
	}
	if c.Headroom, err = c.Headroom.Validate(); err != nil {
		return c, err
	}
	if c.TokenLimit < 0 {
		return c, fmt.Errorf("flow_control.max_queued_tokens: %d is negative", c.TokenLimit)
	}
	if c.Rescrape < 0 {
		return c, fmt.Errorf("flowcontrol: rescrape interval %v is negative", c.Rescrape)
	}
	if c.PrefillHeadroom == 0 {
		c.PrefillHeadroom = DefaultPrefillHeadroom
	}
	if math.IsNaN(c.ShortShare) || c.ShortShare >= 1 {
		return c, fmt.Errorf("flow_control.short_prompt_share: %v is not below 1", c.ShortShare)
	}
	if c.ShortShare == 0 {
		c.ShortShare = DefaultShortShare
	}
	return c, nil
}

// Fit is how a member stands for a request.
type Fit uint8

// Fits.
const (
	// Fits: the member takes the request now.
	Fits Fit = iota
	// Paced: the member is not full, but holds the request back: headroom
	// for an active higher band (in requests or in queued prefill), or
	// slow start on a member whose capacity is not known yet.
	Paced
	// Full: Judge finds the member full (its in-flight bound or learned
	// capacity, the token limit, or its engine's signals).
	Full
)

var fitNames = [...]string{"fits", "paced", "full"}

func (f Fit) String() string {
	if int(f) < len(fitNames) {
		return fitNames[f]
	}
	return fmt.Sprintf("fit(%d)", uint8(f))
}

// Room is the admission judgement of each member for each request: the
// headroom of active higher bands, what each engine's scrapes teach of
// its capacity, and slow start while none is known. The server's gate and
// the simulator both judge with it. Not safe for concurrent use; time is
// passed in. K identifies a member.
type Room[K comparable] struct {
	cfg  RoomConfig
	hr   *Headroom
	caps map[K]*capacity
	// short is when a short prompt (below PrefillHeadroom tokens) was
	// last seen.
	short time.Time
}

// NewRoom returns a Room under cfg, validated.
func NewRoom[K comparable](cfg RoomConfig) (*Room[K], error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	hr, err := NewHeadroom(cfg.Headroom)
	if err != nil {
		return nil, err
	}
	return &Room[K]{cfg: cfg, hr: hr, caps: map[K]*capacity{}}, nil
}

// Config is r's configuration, defaults filled.
func (r *Room[K]) Config() RoomConfig { return r.cfg }

// Saw records a request of band priority with a prompt of tokens at now:
// its band is active (Headroom.Saw), and so are short prompts if it is
// one.
func (r *Room[K]) Saw(priority, tokens int, now time.Time) {
	r.hr.Saw(priority, now)
	if tokens < r.cfg.PrefillHeadroom {
		r.short = now
	}
}

// Long reports whether a prompt of tokens is long: it is held by the
// short-prompt lane (LaneFull) and counts a member as busy.
func (r *Room[K]) Long(tokens int) bool {
	return r.cfg.PrefillHeadroom > 0 && r.cfg.ShortShare > 0 && tokens >= r.cfg.PrefillHeadroom
}

// LaneFull reports whether a long prompt is held at now to keep the
// short-prompt lane free: short prompts are active and busy of n members
// already have PrefillHeadroom tokens of prefill queued, so one more
// long prompt would leave fewer than ShortShare of them free of one.
func (r *Room[K]) LaneFull(busy, n int, now time.Time) bool {
	keep := int(r.cfg.ShortShare * float64(n))
	if keep < 1 || r.short.IsZero() || now.Sub(r.short) > r.cfg.Headroom.Window {
		return false
	}
	return busy >= n-keep
}

// Busy reports whether a member with queued prefill tokens counts as
// prefilling a long prompt for LaneFull.
func (r *Room[K]) Busy(queued int) bool {
	return r.cfg.PrefillHeadroom > 0 && queued >= r.cfg.PrefillHeadroom
}

// Fit judges member k, with load l and last scrape s, for a request of
// band priority at now. rescrape is true when a fresh scrape of k is due:
// the member is in slow start at its probe bound and none was asked for
// within RoomConfig.Rescrape (the Room counts it as asked). A scrape that
// answers it is read by the next Fit of k.
func (r *Room[K]) Fit(k K, l Load, s Scrape, priority int, now time.Time) (fit Fit, rescrape bool) {
	m, probe := r.member(k, l, s, priority, now)
	if probe > 0 && m.InFlight >= probe {
		c := r.caps[k]
		if rescrape = now.Sub(c.asked) >= r.cfg.Rescrape; rescrape {
			c.asked = now
		}
	}
	switch {
	case Judge(m, r.cfg.Thresholds) != Free:
		return Full, rescrape
	case probe > 0 && m.InFlight >= probe:
		return Paced, rescrape
	}
	limit := m.Limit
	if probe > 0 {
		limit = probe
	}
	if !r.hr.Admits(priority, m.InFlight, limit, now) || !r.prefillRoom(m.QueuedTokens, priority, now) {
		return Paced, rescrape
	}
	return Fits, rescrape
}

// member is what Judge sees of member k for a request of band priority:
// its load against the smaller of its in-flight bound and its engine's
// learned capacity, and the engine's signals; and the slow-start bound of
// a member whose capacity is not known (0 when none applies). While the
// capacity is known, the engine's waiting count (up to a scrape old) is
// left out: the in-flight count against the capacity says the same,
// exactly and now. The capacity does not hold back a request of the
// highest active band from an engine that is sent priorities
// (RoomConfig.EnginePriority): the engine runs it before anything it
// holds, preempting lower work. Until a scrape shows the engine queueing,
// a member with signals holds at most its probe bound, and a fresh scrape
// that shows the engine running them all without queueing raises it.
func (r *Room[K]) member(k K, l Load, s Scrape, priority int, now time.Time) (Member, int) {
	m := Member{InFlight: l.InFlight, Limit: l.Limit, QueuedTokens: l.QueuedTokens, TokenLimit: r.cfg.TokenLimit}
	if !s.Known {
		return m, 0
	}
	c := r.caps[k]
	if c == nil {
		if len(r.caps) >= MaxRoomMembers {
			clear(r.caps)
		}
		c = &capacity{}
		r.caps[k] = c
	}
	c.learn(s, r.cfg.Thresholds.MaxWaiting)
	m.Engine = Engine{Known: true, Age: now.Sub(s.At), Waiting: s.Waiting, KVUtil: s.KVUtil}
	probe := 0
	switch {
	case r.overtakes(s, priority, now):
	case c.slots > 0:
		if m.Limit <= 0 || c.slots < m.Limit {
			m.Limit = c.slots
		}
	case r.cfg.Rescrape > 0 && (m.Limit <= 0 || c.probe() < m.Limit):
		probe = c.probe()
	}
	if c.slots > 0 {
		m.Engine.Waiting = 0
	}
	return m, probe
}

// prefillRoom reports whether a member with queued prefill tokens may
// take a request of band priority: always, unless a band above it is
// active and queued reaches PrefillHeadroom. So a lower band prefills
// about one long prompt at a time on each member while a higher band is
// active, and a higher band's short prompt shares the engine's prefill
// compute with few others.
func (r *Room[K]) prefillRoom(queued, priority int, now time.Time) bool {
	limit := r.cfg.PrefillHeadroom
	return limit <= 0 || queued < limit || r.hr.Reserved(priority, 2, now) == 0
}

// overtakes reports whether a request of band priority goes to an engine
// that schedules by priority ahead of everything else active: priorities
// are sent, the engine takes them, and no band above it is active.
func (r *Room[K]) overtakes(s Scrape, priority int, now time.Time) bool {
	return r.cfg.EnginePriority && s.TakesPriority && r.hr.Reserved(priority, 2, now) == 0 && priority > 0
}
