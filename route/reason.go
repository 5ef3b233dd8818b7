package route

import "fmt"

// Reason says why a Decision chose its backend.
type Reason int

const (
	// ReasonAffinity: the key's home on the ring had room.
	ReasonAffinity Reason = iota
	// ReasonSpill: the home was full (or, for prefix-index's cold prompts,
	// had too much more queued work than another candidate); the clockwise
	// walk from the key went Distance candidates further.
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

// reasonNames are the names X-Prefixgate-Decision carries, by Reason.
var reasonNames = [...]string{
	ReasonAffinity:         "affinity",
	ReasonSpill:            "spill",
	ReasonSpillChain:       "spill-chain",
	ReasonLeastOutstanding: "least-outstanding",
	ReasonRandom:           "random",
	ReasonPrefixMatch:      "prefix-match",
}

func (r Reason) String() string {
	if r >= 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", int(r))
}
