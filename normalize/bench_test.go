package normalize

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// chatBodyOfSize builds a realistic chat request of about size bytes: a
// system prompt, a shared document with some non-ASCII text and escapes, a
// short history and a final question, with sampling parameters and
// metadata in front, the way many clients serialize them.
func chatBodyOfSize(size int) []byte {
	para := "The quarterly report (Q3) shows revenue of €4.2M, up 12% — \"strong\" growth.\nSee table 4: café, naïve, 東京.\t"
	doc := strings.Repeat(para, size/len(para)+1)
	body := func(doc string) []byte {
		return fmt.Appendf(nil, `{"stream":true,"user":"user-1234","metadata":{"session":"s-99","ts":"2026-05-01T10:00:00Z"},"temperature":0.7,"top_p":1.0,"max_tokens":512,"model":"llama-3.1-70b","messages":[{"role":"system","content":"You are a careful analyst. Answer briefly."},{"role":"user","content":%s},{"role":"assistant","content":"Noted."},{"role":"user","content":[{"type":"text","text":"What grew, and by how much?"}]}],"stream_options":{"include_usage":true}}`, quoteJSON(doc))
	}
	b := body(doc)
	// Trim the document until the body fits.
	over := len(b) - size
	if over > 0 {
		r := []rune(doc)
		for over > 0 && len(r) > 0 {
			over -= len(string(r[len(r)-1]))
			r = r[:len(r)-1]
		}
		b = body(string(r))
	}
	return b
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// cpuPerOp locks the benchmark to its thread and, when the returned func
// runs, reports the thread's CPU time per op as cpu-ns/op: on a shared
// machine wall-clock ns/op also counts time spent descheduled.
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

var benchSizes = []struct {
	name string
	size int
}{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}, {"256KiB", 256 << 10}}

func BenchmarkCanonical(b *testing.B) {
	for _, sz := range benchSizes {
		body := chatBodyOfSize(sz.size)
		b.Run(sz.name+"/prefixgate", func(b *testing.B) {
			dst := make([]byte, 0, 2*len(body))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				var err error
				if dst, _, err = AppendCanonical(dst[:0], body, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sz.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(body, &v); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sz.name+"/gowebpki-jcs", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				if _, err := jcs.Transform(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRouteKey(b *testing.B) {
	body := chatBodyOfSize(32 << 10)
	canon, err := Canonicalize(body)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{4096, 65536} {
		b.Run(fmt.Sprintf("32KiB/N=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(canon)))
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				if _, err := RouteKey(canon, KeyOptions{PrefixLength: n}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// With the prefix blocks of the whole prompt (the server's pass).
	b.Run("32KiB/N=4096/blocks", func(b *testing.B) {
		b.SetBytes(int64(len(canon)))
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := RouteKey(canon, KeyOptions{Blocks: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkNormalize(b *testing.B) {
	body := chatBodyOfSize(32 << 10)
	dst := make([]byte, 0, 2*len(body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		var err error
		if dst, _, err = Normalize(dst[:0], body, Options{}, KeyOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBenchBodiesValid(t *testing.T) {
	for _, sz := range benchSizes {
		body := chatBodyOfSize(sz.size)
		if len(body) > sz.size || len(body) < sz.size*9/10 {
			t.Errorf("%s body is %d bytes", sz.name, len(body))
		}
		if _, err := Canonicalize(body); err != nil {
			t.Error(err)
		}
	}
}

// BenchmarkNormalizeServer is the server's pass over a chat body: canonical
// bytes, key, spill keys and the prefix blocks the default policy reads,
// into a reused buffer.
func BenchmarkNormalizeServer(b *testing.B) {
	for _, sz := range benchSizes {
		body := chatBodyOfSize(sz.size)
		b.Run(sz.name, func(b *testing.B) {
			dst := make([]byte, 0, 2*len(body))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				var err error
				if dst, _, err = Normalize(dst[:0], body, Options{}, KeyOptions{Blocks: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// proxyBodyOfSize is the body shape of the server overhead benchmark
// (internal/overhead): ASCII prose with an escaped newline every dozen
// words or so, a system message holding the document and a user question.
func proxyBodyOfSize(size int) []byte {
	words := strings.Fields("the replica keeps a cache of every prompt prefix it has seen and skips the prefill " +
		"when a request begins with one of them so routing equal prefixes to one replica saves compute")
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":16,"temperature":0,"messages":[{"role":"system","content":"Answer briefly.\n\n`)
	tail := `"},{"role":"user","content":"Question 1: what does the document say?"}]}`
	for i := 0; b.Len()+len(tail)+16 < size; i++ {
		b.WriteString(words[i*7%len(words)])
		if i%12 == 11 {
			b.WriteString(`.\n`)
		}
		b.WriteByte(' ')
	}
	b.WriteString(tail)
	return []byte(b.String())
}

// BenchmarkNormalizeProxy is BenchmarkNormalizeServer on the overhead
// benchmark's bodies.
func BenchmarkNormalizeProxy(b *testing.B) {
	for _, sz := range benchSizes[:2] {
		body := proxyBodyOfSize(sz.size)
		b.Run(sz.name, func(b *testing.B) {
			dst := make([]byte, 0, 2*len(body))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				var err error
				if dst, _, err = Normalize(dst[:0], body, Options{}, KeyOptions{Blocks: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
