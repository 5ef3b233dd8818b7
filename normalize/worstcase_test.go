package normalize

import (
	"strconv"
	"strings"
	"testing"
)

// BenchmarkWorstCaseInput canonicalizes bodies built to be expensive: long
// number literals that must be parsed, strings made of escapes, many tiny
// members, deep nesting. Each comes in two sizes; the cost per byte must
// not grow with the size (docs/benchmarks.md).
func BenchmarkWorstCaseInput(b *testing.B) {
	bodies := []struct {
		name string
		body func(n int) string
	}{
		{"long-number", func(n int) string { return "[" + strings.Repeat("1", n) + ".5e-" + strconv.Itoa(n) + "]" }},
		{"escapes", func(n int) string { return `["` + strings.Repeat(`\u00e9\n\ud83d\ude00`, n/20) + `"]` }},
		{"tiny-members", func(n int) string {
			var sb strings.Builder
			sb.WriteString("{")
			for i := range n / 12 {
				if i > 0 {
					sb.WriteString(",")
				}
				sb.WriteString(`"` + strconv.Itoa(i) + `":[0]`)
			}
			return sb.String() + "}"
		}},
		{"deep-nesting", func(n int) string {
			unit := strings.Repeat(`{"a":[`, 63) + "1" + strings.Repeat("]}", 63)
			return "[" + strings.Repeat(unit+",", n/len(unit)) + "0]"
		}},
	}
	for _, c := range bodies {
		for _, n := range []int{1 << 20, 2 << 20, 4 << 20} {
			body := []byte(c.body(n - 64))
			b.Run(c.name+"/"+strconv.Itoa(n>>20)+"MiB", func(b *testing.B) {
				dst := make([]byte, 0, 2*len(body))
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
}

// BenchmarkWorstCaseEscapesNormalize is the escapes body of
// BenchmarkWorstCaseInput as a chat message's content through Normalize
// with prefix blocks: every escape is decoded into the routing text while
// the parse scans it.
func BenchmarkWorstCaseEscapesNormalize(b *testing.B) {
	for _, n := range []int{1 << 20, 4 << 20} {
		body := []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat(`\u00e9\n\ud83d\ude00`, (n-64)/20) + `"}]}`)
		b.Run(strconv.Itoa(n>>20)+"MiB", func(b *testing.B) {
			dst := make([]byte, 0, 2*len(body))
			b.SetBytes(int64(len(body)))
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
