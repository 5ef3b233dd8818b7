package sim

import (
	"time"

	"github.com/zeebo/xxh3"
)

// Peer references: other routers' published algorithms, each in its own
// peer_*.go file with its defaults and its source named in
// docs/simulation.md. A peer keeps the load view its router keeps (its own
// in-flight counts) unless the router scrapes replica metrics, in which case
// it reads the engines' metrics at the router's scrape interval. Peers never
// hold a request back: like the routers they model, they always send.

// peerOrder is the report order of the peers.
var peerOrder = []string{"sglang-cache-aware", "vllm-prefixaware", "dynamo-kv", "gie-prefix"}

const oraclePolicy = "oracle"

// peerBuilders makes a peer's picker for one router over fleet f.
var peerBuilders = map[string]func(f *fleet, seed uint64) picker{
	"sglang-cache-aware": newSGLangPicker,
	"vllm-prefixaware":   newVLLMPrefixPicker,
	"dynamo-kv":          newDynamoPicker,
	"gie-prefix":         newGIEPicker,
	oraclePolicy:         newOraclePicker,
}

// routingText appends the text a text-level router reads from r: for a chat,
// the message contents joined by sep (the peers read contents, not roles or
// the chat template); for a completion, the prompt.
func routingText(dst []byte, r *Request, sep string) []byte {
	if r.Messages == nil {
		for _, s := range r.Prompt {
			dst = appendSegText(dst, s, 1<<62)
		}
		return dst
	}
	for i, m := range r.Messages {
		if i > 0 {
			dst = append(dst, sep...)
		}
		for _, s := range m.Content {
			dst = appendSegText(dst, s, 1<<62)
		}
	}
	return dst
}

// chainChunks appends the chained hashes of text's chunks of size bytes:
// h[i] = xxh3(h[i-1] || chunk i), seeded with seed. A shorter last chunk is
// hashed too if partial is set. Equal chains mean equal prefixes, so a set
// of chain hashes is a trie flattened.
func chainChunks(dst []uint64, text []byte, size int, seed uint64, partial bool) []uint64 {
	h := seed
	var buf [8]byte
	for i := 0; i < len(text); i += size {
		end := i + size
		if end > len(text) {
			if !partial {
				break
			}
			end = len(text)
		}
		for k := range buf {
			buf[k] = byte(h >> (8 * k))
		}
		h = xxh3.HashSeed(text[i:end], xxh3.Hash(buf[:]))
		dst = append(dst, h)
	}
	return dst
}

// repSet is a set of replica indexes.
type repSet []uint64

func (s repSet) has(i int) bool { return i>>6 < len(s) && s[i>>6]&(1<<(i&63)) != 0 }

func (s *repSet) add(i int) {
	for i>>6 >= len(*s) {
		*s = append(*s, 0)
	}
	(*s)[i>>6] |= 1 << (i & 63)
}

// rng is a deterministic random source for tie breaks (splitmix64).
type rng struct{ s uint64 }

func (r *rng) intn(n int) int {
	r.s += 0x9e3779b97f4a7c15
	return int(mix(r.s) % uint64(n))
}

// pickTie returns one of xs at random (xs not empty).
func (r *rng) pickTie(xs []int) int {
	if len(xs) == 1 {
		return xs[0]
	}
	return xs[r.intn(len(xs))]
}

// ownLoad is a router's own in-flight count per replica.
type ownLoad map[int]int

// scraped is one replica's metrics as a scraping router last read them.
type scraped struct {
	waiting int
	kvUsage float64
}

// metrics returns the replicas' metrics as of the last scrape, scraping
// again if interval has passed since (or the fleet changed): a router that
// polls /metrics every interval sees them that stale.
func (f *fleet) metrics(now time.Time, interval time.Duration) []scraped {
	if f.scraped == nil || len(f.scraped) < len(f.reps) || now.Sub(f.scrapedAt) >= interval {
		f.scraped = f.scraped[:0]
		for _, r := range f.reps {
			st := r.eng.Stats()
			f.scraped = append(f.scraped, scraped{waiting: st.Waiting, kvUsage: st.KVCacheUsage})
		}
		f.scrapedAt = now
	}
	return f.scraped
}
