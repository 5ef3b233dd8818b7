package route

import "fmt"

// Health is a member's routing state, set by SetHealth. The zero value is
// HealthHealthy.
type Health int32

const (
	// HealthHealthy members are candidates.
	HealthHealthy Health = iota
	// HealthEjected members failed health checks; they get no new requests
	// but keep their ring positions, so their keys return when they do.
	HealthEjected
	// HealthDraining members finish what they have and get nothing new.
	HealthDraining
)

func (h Health) String() string {
	switch h {
	case HealthHealthy:
		return "healthy"
	case HealthEjected:
		return "ejected"
	case HealthDraining:
		return "draining"
	}
	return fmt.Sprintf("health(%d)", int32(h))
}

// Reason says why a Decision chose its backend.
type Reason int

const (
	// ReasonAffinity: the key's home on the ring had room.
	ReasonAffinity Reason = iota
	// ReasonSpill: the home was full; the clockwise walk from the key went
	// Distance candidates further.
	ReasonSpill
	// ReasonSpillChain: the home was full; the home of SpillKeys[Distance-1]
	// (a longer-prefix secondary) had room.
	ReasonSpillChain
	// ReasonLeastOutstanding: the candidate with the fewest requests in flight.
	ReasonLeastOutstanding
	// ReasonRandom: a uniformly random candidate with room.
	ReasonRandom
	// ReasonPrefixMatch: prefix-index predicted the least work there (its
	// cached prefix outweighs its queue); it is not the key's home.
	ReasonPrefixMatch
)

func (r Reason) String() string {
	switch r {
	case ReasonAffinity:
		return "affinity"
	case ReasonSpill:
		return "spill"
	case ReasonSpillChain:
		return "spill-chain"
	case ReasonLeastOutstanding:
		return "least-outstanding"
	case ReasonRandom:
		return "random"
	case ReasonPrefixMatch:
		return "prefix-match"
	}
	return fmt.Sprintf("reason(%d)", int(r))
}
