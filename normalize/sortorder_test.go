package normalize

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// Member names arrive in an order the client chooses, so the member sort
// must not have a slow order. These tests count comparisons (not time): a
// crafted order must stay within a small factor of a random one.

// memberObject returns an object whose i-th member is named after ranks[i],
// so that sorting the members sorts the ranks.
func memberObject(ranks []int) []byte {
	b := make([]byte, 0, len(ranks)*14)
	b = append(b, '{')
	for i, r := range ranks {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"k%08d":0`, r)
	}
	return append(b, '}')
}

// mcIlroyKiller returns, for sort (which sorts the indices it is given with
// the comparison it is given), an order of 0..n-1 that drives it to its
// worst case: M. D. McIlroy's adversary ("A Killer Adversary for
// Quicksort", 1999) decides each comparison lazily, freezing values so that
// the pivot candidates always come out small.
func mcIlroyKiller(n int, sort func(ms []int32, cmp func(a, b int32) int)) []int {
	gas := n
	val := make([]int, n)
	for i := range val {
		val[i] = gas
	}
	solid, candidate := 0, int32(-1)
	freeze := func(x int32) { val[x] = solid; solid++ }
	cmpFn := func(x, y int32) int {
		if val[x] == gas && val[y] == gas {
			if x == candidate {
				freeze(x)
			} else {
				freeze(y)
			}
		}
		switch {
		case val[x] == gas:
			candidate = x
		case val[y] == gas:
			candidate = y
		}
		return val[x] - val[y]
	}
	ms := make([]int32, n)
	for i := range ms {
		ms[i] = int32(i)
	}
	sort(ms, cmpFn)
	for i := range val {
		if val[i] == gas {
			val[i] = solid
			solid++
		}
	}
	return val
}

// naiveQuickSort is a textbook member sort: median-of-three quicksort
// with insertion sort below 17 members. It is here only to craft the order
// that makes such a sort quadratic and to show that order is a real attack.
func naiveQuickSort(ms []int32, cmpFn func(a, b int32) int) {
	less := func(a, b int32) bool { return cmpFn(a, b) < 0 }
	var insertion func([]int32)
	insertion = func(ms []int32) {
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && less(ms[j], ms[j-1]); j-- {
				ms[j], ms[j-1] = ms[j-1], ms[j]
			}
		}
	}
	var qs func([]int32)
	qs = func(ms []int32) {
		for len(ms) > 16 {
			m, l := len(ms)/2, len(ms)-1
			if less(ms[m], ms[0]) {
				ms[m], ms[0] = ms[0], ms[m]
			}
			if less(ms[l], ms[0]) {
				ms[l], ms[0] = ms[0], ms[l]
			}
			if less(ms[l], ms[m]) {
				ms[l], ms[m] = ms[m], ms[l]
			}
			pivot := ms[m]
			i, j := 0, l
			for i <= j {
				for less(ms[i], pivot) {
					i++
				}
				for less(pivot, ms[j]) {
					j--
				}
				if i <= j {
					ms[i], ms[j] = ms[j], ms[i]
					i++
					j--
				}
			}
			if j < len(ms)-1-i {
				qs(ms[:j+1])
				ms = ms[i:]
			} else {
				qs(ms[i:])
				ms = ms[:j+1]
			}
		}
		insertion(ms)
	}
	qs(ms)
}

type namedOrder struct {
	name  string
	ranks []int
}

var (
	ordersMu    sync.Mutex
	ordersCache = map[int][]namedOrder{}
)

// memberOrders returns named orders of 0..n-1: a seeded random one and the
// crafted ones. Crafting the killer of naiveQuickSort runs that quadratic sort, so
// the orders are made once per n.
func memberOrders(n int) []namedOrder {
	ordersMu.Lock()
	defer ordersMu.Unlock()
	if o, ok := ordersCache[n]; ok {
		return o
	}
	o := craftOrders(n)
	ordersCache[n] = o
	return o
}

func craftOrders(n int) []namedOrder {
	seq := func(f func(i int) int) []int {
		r := make([]int, n)
		for i := range r {
			r[i] = f(i)
		}
		return r
	}
	random := seq(func(i int) int { return i })
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { random[i], random[j] = random[j], random[i] })
	return []namedOrder{
		{"random", random},
		{"sorted", seq(func(i int) int { return i })},
		{"reversed", seq(func(i int) int { return n - 1 - i })},
		{"organ-pipe", seq(func(i int) int { return min(2*i, 2*(n-1-i)+1) })},
		{"sawtooth", seq(func(i int) int { return (i%64)*(n/64) + i/64 })},
		{"quicksort-killer", mcIlroyKiller(n, naiveQuickSort)},
		{"pdqsort-adversary", mcIlroyKiller(n, func(ms []int32, c func(a, b int32) int) { slices.SortFunc(ms, c) })},
	}
}

// comparisonsToParse returns how many member comparisons parsing body took.
func comparisonsToParse(t testing.TB, body []byte) int {
	p := newParser()
	if err := p.parse(body, Options{}.withDefaults()); err != nil {
		t.Fatal(err)
	}
	return p.comparisons
}

func TestMemberSortHasNoSlowOrder(t *testing.T) {
	const n = 8192
	orders := memberOrders(n)
	random := comparisonsToParse(t, memberObject(orders[0].ranks))
	for _, o := range orders[1:] {
		got := comparisonsToParse(t, memberObject(o.ranks))
		t.Logf("%-22s %8d comparisons (random: %d, ratio %.2f)", o.name, got, random, float64(got)/float64(random))
		if got > 3*random {
			t.Errorf("%s order: %d comparisons, more than 3× the %d of a random order", o.name, got, random)
		}
	}
}

// TestKillerOrderIsAnAttack shows the crafted order above is a real
// attack: naiveQuickSort needs quadratically many comparisons on it, so
// the test above would catch a member sort of that kind.
func TestKillerOrderIsAnAttack(t *testing.T) {
	const n = 8192
	count := func(ranks []int) int {
		c := 0
		ms := make([]int32, n)
		for i := range ms {
			ms[i] = int32(i)
		}
		naiveQuickSort(ms, func(a, b int32) int { c++; return ranks[a] - ranks[b] })
		return c
	}
	orders := memberOrders(n)
	random, killer := count(orders[0].ranks), count(orders[5].ranks)
	t.Logf("naive quicksort: random %d, killer %d comparisons", random, killer)
	if killer < 20*random {
		t.Errorf("killer order takes naiveQuickSort %d comparisons, random %d: not the quadratic case", killer, random)
	}
}

func TestMemberSortStillDetectsDuplicates(t *testing.T) {
	ranks := mcIlroyKiller(4096, func(ms []int32, c func(a, b int32) int) { slices.SortFunc(ms, c) })
	ranks[4000] = ranks[17]
	body := memberObject(ranks)
	err := Validate(body, Options{})
	if ErrorCode(err) != CodeDuplicateMember {
		t.Fatalf("want duplicate-member, got %v", err)
	}
	// The later of the two is reported, at its opening quote.
	want := int64(1 + 4000*len(`"k00000000":0,`))
	if se := err.(*SyntaxError); se.Offset != want {
		t.Fatalf("duplicate reported at %d, want %d", se.Offset, want)
	}
}

// BenchmarkMemberOrder canonicalizes one object of 16,384 members (230 KB)
// in random and crafted orders. Crafted orders must cost about what random
// order costs; see docs/benchmarks.md. (Crafting naiveQuickSort's killer order
// runs that quadratic sort once, which is why n is not larger.)
func BenchmarkMemberOrder(b *testing.B) {
	n := 16384
	for _, o := range memberOrders(n) {
		body := memberObject(o.ranks)
		b.Run(o.name+"/n="+strconv.Itoa(n), func(b *testing.B) {
			dst := make([]byte, 0, len(body))
			b.SetBytes(int64(len(body)))
			defer cpuPerOp(b)()
			for b.Loop() {
				var err error
				if dst, _, err = AppendCanonical(dst[:0], body, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
