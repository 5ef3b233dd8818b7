package route

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
)

// benchKeys is a fixed set of keys with spill chains; picks cycle over it.
var benchKeys = func() []Request {
	rs := make([]Request, 4096)
	for i := range rs {
		k := splitmix(uint64(i) + 1)
		rs[i] = Request{Key: k, SpillKeys: []uint64{splitmix(k), splitmix(k + 1)}}
	}
	return rs
}()

// cpuPerOp locks the benchmark to its thread and, when the returned func
// runs, reports the thread's CPU time per op as cpu-ns/op.
func cpuPerOp(b *testing.B) func() {
	runtime.LockOSThread()
	start, ok := threadCPU()
	return func() {
		end, _ := threadCPU()
		runtime.UnlockOSThread()
		if ok && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

var benchRouters = map[string]*Router{}

// benchRouter builds each fleet once: building 1,024 backends' rings is far
// slower than the picks being measured.
func benchRouter(b *testing.B, policy string, n int) *Router {
	id := fmt.Sprint(policy, n)
	if r := benchRouters[id]; r != nil {
		return r
	}
	r := mustNew(b, Config{Policy: policy, DefaultThreshold: MaxThreshold}, fleet(n))
	benchRouters[id] = r
	b.ResetTimer()
	return r
}

// BenchmarkPick measures Pick plus Done, serial and parallel, per policy and
// fleet size, with default VirtualNodes (4096 per backend).
func BenchmarkPick(b *testing.B) {
	ctx := context.Background()
	for _, policy := range []string{"prefix-aware", "consistent-hash", "least-outstanding", "random"} {
		for _, n := range []int{7, 64, 1024} {
			b.Run(fmt.Sprintf("policy=%s/backends=%d/serial", policy, n), func(b *testing.B) {
				r := benchRouter(b, policy, n)
				b.ReportAllocs()
				defer cpuPerOp(b)()
				i := 0
				for b.Loop() {
					d, err := r.Pick(ctx, benchKeys[i&4095])
					if err != nil {
						b.Fatal(err)
					}
					d.Done()
					i++
				}
			})
			b.Run(fmt.Sprintf("policy=%s/backends=%d/parallel", policy, n), func(b *testing.B) {
				r := benchRouter(b, policy, n)
				b.ReportAllocs()
				var seq atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(1) * 977)
					for pb.Next() {
						d, err := r.Pick(ctx, benchKeys[i&4095])
						if err != nil {
							b.Error(err)
							return
						}
						d.Done()
						i++
					}
				})
			})
		}
	}
}

// BenchmarkPickSpill measures the spill path: every key's home is held at
// its threshold, so each pick takes the spill chain.
func BenchmarkPickSpill(b *testing.B) {
	r := mustNew(b, Config{DefaultThreshold: 1, LoadFactor: 100}, fleet(64))
	held := make([]Decision, 0, 64)
	for i := 0; len(held) < 32; i++ {
		if d, err := r.TryPick(Request{Key: uint64(i) << 40}); err == nil {
			held = append(held, d)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d, err := r.TryPick(benchKeys[i&4095])
		if err == nil {
			d.Done()
		}
		i++
	}
	for i := range held {
		held[i].Done()
	}
}

// naiveRing is what a user might write first: a sorted ring searched with
// sort.Search, loads in a map, everything under one mutex, with the same
// bounded-load rule and the same virtual nodes.
type naiveRing struct {
	mu     sync.Mutex
	hashes []uint64
	owners []string
	load   map[string]int
	total  int
	n      int
}

func newNaiveRing(n, vnodes int) *naiveRing {
	type vn struct {
		h uint64
		o string
	}
	var vs []vn
	for i := range n {
		name := fmt.Sprintf("vllm-%d", i)
		for v := range vnodes {
			vs = append(vs, vn{xxh3.HashString(name + "#" + strconv.Itoa(v)), name})
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].h < vs[j].h })
	r := &naiveRing{load: map[string]int{}, n: n}
	for _, v := range vs {
		r.hashes = append(r.hashes, v.h)
		r.owners = append(r.owners, v.o)
	}
	return r
}

func (r *naiveRing) pick(key uint64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.hashes), func(i int) bool { return r.hashes[i] >= key })
	bound := int(math.Ceil(1.25 * float64(r.total+1) / float64(r.n)))
	for step := 0; step < len(r.hashes); step++ {
		o := r.owners[(i+step)%len(r.hashes)]
		if r.load[o] < bound {
			r.load[o]++
			r.total++
			return o
		}
	}
	return ""
}

func (r *naiveRing) done(name string) {
	r.mu.Lock()
	r.load[name]--
	r.total--
	r.mu.Unlock()
}

func BenchmarkNaiveMutexRing(b *testing.B) {
	for _, n := range []int{7, 64, 1024} {
		var r *naiveRing
		b.Run(fmt.Sprintf("backends=%d/serial", n), func(b *testing.B) {
			r = newNaiveRing(n, DefaultVirtualNodes)
			b.ResetTimer()
			b.ReportAllocs()
			defer cpuPerOp(b)()
			i := 0
			for b.Loop() {
				r.done(r.pick(benchKeys[i&4095].Key))
				i++
			}
		})
		b.Run(fmt.Sprintf("backends=%d/parallel", n), func(b *testing.B) {
			b.ReportAllocs()
			var seq atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(1) * 977)
				for pb.Next() {
					r.done(r.pick(benchKeys[i&4095].Key))
					i++
				}
			})
		})
	}
}

func BenchmarkSetMembers(b *testing.B) {
	for _, n := range []int{7, 64, 1024} {
		ms := fleet(n)
		r := mustNew(b, Config{}, ms)
		b.Run(fmt.Sprintf("backends=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := r.SetMembers(ms); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPrefixIndex measures a prefix-index pick on the steady path: 64
// backends, prompts of 32 KiB (512 blocks of 64 characters, 8,192 tokens)
// that the index already holds, so the pick walks all 512 blocks, costs
// every candidate and marks the blocks used; then the first byte and Done.
// It also reports the index's memory per backend and in all.
func BenchmarkPrefixIndex(b *testing.B) { benchPrefixIndex(b, 0) }

// BenchmarkPrefixIndexLearn is BenchmarkPrefixIndex with the update after
// the answer: Done reports what the backend holds, the prompt followed by
// a 4 KiB answer (64 blocks), which the index learns for the chosen
// backend (Outcome.Blocks). Each prompt's answer is the same every time, so
// after the setup every block is held and learning marks them used.
func BenchmarkPrefixIndexLearn(b *testing.B) { benchPrefixIndex(b, 64) }

func benchPrefixIndex(b *testing.B, answer int) {
	const docs, blocks = 256, 512
	r := mustNew(b, Config{Policy: "prefix-index", DefaultThreshold: MaxThreshold}, fleet(64))
	reqs := make([]Request, docs)
	learned := make([]Outcome, docs)
	for i := range reqs {
		bl := make([]uint64, blocks, blocks+answer)
		h := splitmix(uint64(i) + 1)
		for k := range bl {
			h = splitmix(h ^ uint64(k))
			bl[k] = h
		}
		reqs[i] = Request{Key: splitmix(uint64(i)), Blocks: bl, PromptTokens: blocks * IndexBlockTokens}
		learned[i] = Outcome{FirstByte: true, PromptTokens: -1, CachedTokens: -1}
		if answer > 0 {
			learned[i].Blocks = extend(bl, uint64(i), answer)
		}
		d, err := r.TryPick(reqs[i])
		if err != nil {
			b.Fatal(err)
		}
		d.DoneWith(learned[i])
	}
	first := Outcome{FirstByte: true, PromptTokens: -1, CachedTokens: -1}
	// Each op's wall time, for the median: the mean of a loaded machine is
	// pulled up by the few ops that lose the CPU.
	took := make([]time.Duration, 0, 1<<20)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	i := 0
	for b.Loop() {
		start := time.Now()
		d, err := r.TryPick(reqs[i%docs])
		if err != nil {
			b.Fatal(err)
		}
		d.Report(first)
		if answer > 0 {
			d.DoneWith(learned[i%docs])
		} else {
			d.Done()
		}
		if len(took) < cap(took) {
			took = append(took, time.Since(start))
		}
		i++
	}
	b.StopTimer()
	slices.Sort(took)
	if len(took) > 0 {
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "median-ns")
	}
	stats, _ := r.IndexStats()
	b.ReportMetric(float64(stats.Bytes), "index-bytes")
	b.ReportMetric(float64(stats.Bytes)/64, "index-bytes/backend")
}

// BenchmarkPrefixIndexCold measures a prefix-index pick whose prompt the
// index has never seen (32 KiB, 512 blocks, new every op): the match ends
// at the first block, the ring places the prompt, and the index adds its
// 128 sampled blocks to the chosen backend, which, once full (1,024
// entries each here, filled after about 512 ops), evicts as many. The op
// also computes the prompt's 512 block hashes.
func BenchmarkPrefixIndexCold(b *testing.B) {
	const blocks = 512
	r := mustNew(b, Config{Policy: "prefix-index", DefaultThreshold: MaxThreshold, DefaultCacheTokens: 1 << 16}, fleet(64))
	bl := make([]uint64, blocks)
	first := Outcome{FirstByte: true, PromptTokens: -1, CachedTokens: -1}
	took := make([]time.Duration, 0, 1<<20)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	i := uint64(0)
	for b.Loop() {
		start := time.Now()
		h := splitmix(i + 1)
		for k := range bl {
			h = splitmix(h ^ uint64(k))
			bl[k] = h
		}
		d, err := r.TryPick(Request{Key: splitmix(i), Blocks: bl, PromptTokens: blocks * IndexBlockTokens})
		if err != nil {
			b.Fatal(err)
		}
		d.Report(first)
		d.Done()
		if len(took) < cap(took) {
			took = append(took, time.Since(start))
		}
		i++
	}
	b.StopTimer()
	slices.Sort(took)
	if len(took) > 0 {
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "median-ns")
	}
}

// BenchmarkPrefixIndexSmallFleet is a request's route work as the
// overhead harness (internal/overhead) makes it: three members, one model,
// 64 prompts of 16 blocks (1 KiB of routing text) or 256 (16 KiB), each
// picked, reported at its first byte and done with its answer learned (the
// prompt's blocks but its last, then two new ones, as
// normalize.RouteInfo.AnswerBlocks gives for a short answer).
func BenchmarkPrefixIndexSmallFleet(b *testing.B) {
	for _, blocks := range []int{16, 256} {
		b.Run(fmt.Sprintf("blocks=%d", blocks), func(b *testing.B) {
			r := mustNew(b, Config{Policy: "prefix-index", DefaultThreshold: MaxThreshold}, fleet(3))
			const docs = 64
			reqs := make([]Request, docs)
			outs := make([]Outcome, docs)
			for i := range reqs {
				bl := make([]uint64, blocks)
				h := splitmix(uint64(i) + 1)
				for k := range bl {
					h = splitmix(h ^ uint64(k))
					bl[k] = h
				}
				reqs[i] = Request{Key: splitmix(uint64(i)), Blocks: bl, PromptTokens: blocks * IndexBlockTokens}
				answer := append(slices.Clone(bl[:blocks-1]), splitmix(h+7), splitmix(h+9))
				outs[i] = Outcome{FirstByte: true, Status: 200, PromptTokens: blocks * IndexBlockTokens, CachedTokens: -1, Blocks: answer}
			}
			first := Outcome{FirstByte: true, PromptTokens: -1, CachedTokens: -1}
			b.ReportAllocs()
			defer cpuPerOp(b)()
			i := 0
			for b.Loop() {
				d, err := r.TryPick(reqs[i%docs])
				if err != nil {
					b.Fatal(err)
				}
				d.Report(first)
				d.DoneWith(outs[i%docs])
				i++
			}
		})
	}
}
