package normalize

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// randText writes a JSON string body of about n characters mixing ASCII,
// multi-byte characters, escapes and control characters.
func randText(r *rand.Rand, n int) string {
	pieces := []string{"a", "hello ", "the quick brown fox ", "é", "東京", "😀", `\"`, `\\`, `\n`, `\t`, `\u0001`, `\u00e9`, `\u6771`, `\ud83d\ude00`, `\/`, "\u2028", "\x7f", " ", "0123456789abcdef"}
	var sb strings.Builder
	for sb.Len() < n {
		if r.Intn(3) == 0 {
			sb.WriteString(strings.Repeat("x", r.Intn(40)))
		}
		sb.WriteString(pieces[r.Intn(len(pieces))])
	}
	return sb.String()
}

func randBody(r *rand.Rand, size int) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	members := []string{}
	if r.Intn(4) > 0 {
		members = append(members, fmt.Sprintf(`"model":"%s"`, randText(r, r.Intn(20))))
	}
	if r.Intn(3) == 0 {
		members = append(members, fmt.Sprintf(`"prompt_cache_key":"%s"`, randText(r, r.Intn(90))))
	}
	if r.Intn(3) == 0 {
		members = append(members, fmt.Sprintf(`"tools":[{"name":"%s","x":[1,2,{"a":"\n"}]}]`, randText(r, r.Intn(size/4+1))))
	}
	if r.Intn(5) == 0 {
		members = append(members, `"temperature":0.5`, `"metadata":{"a":"b\"}]","c":[1,{}]}`)
	}
	switch r.Intn(6) {
	case 0, 1, 2, 3:
		var m []string
		for k := r.Intn(5) + 1; k > 0; k-- {
			role := []string{"user", "assistant", "system", "t\\u006fol", "dévelopeur"}[r.Intn(5)]
			var content string
			switch r.Intn(5) {
			case 0:
				content = "null"
			case 1:
				content = fmt.Sprintf(`[{"text":"%s","type":"text"},{"image_url":{"url":"data:%s"},"type":"image_url"},"%s",{"type":"text"},{"text":"%s","type":"other"}]`, randText(r, r.Intn(size/3+1)), randText(r, 30), randText(r, 20), randText(r, 20))
			case 2:
				content = "[]"
			default:
				content = `"` + randText(r, r.Intn(size+1)) + `"`
			}
			msg := fmt.Sprintf(`{"content":%s,"role":"%s"}`, content, role)
			if r.Intn(6) == 0 {
				msg = fmt.Sprintf(`{"role":"%s","name":"n","content":%s}`, role, content)
			}
			if r.Intn(10) == 0 {
				msg = `"not an object"`
			}
			m = append(m, msg)
		}
		members = append(members, `"messages":[`+strings.Join(m, ",")+`]`)
	case 4:
		var p []string
		for k := r.Intn(6); k > 0; k-- {
			if r.Intn(2) == 0 {
				p = append(p, `"`+randText(r, r.Intn(size/2+1))+`"`)
			} else {
				p = append(p, `[1,2,3]`, `42`)
			}
		}
		members = append(members, `"prompt":[`+strings.Join(p, ",")+`]`)
	case 5:
		members = append(members, `"prompt":"`+randText(r, r.Intn(size+1))+`"`)
	}
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	b.WriteString(strings.Join(members, ","))
	b.WriteByte('}')
	return b.Bytes()
}

const mutations = "\"\\{}[],:u0a \x80\xc3\xff"

func sameRoute(t *testing.T, body []byte, ko KeyOptions) {
	t.Helper()
	got, gerr := RouteKey(body, ko)
	want, werr := refRouteKey(body, ko)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("%+v on %q:\n got err %v\nwant err %v", ko, body, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v on %q:\n got %+v\nwant %+v", ko, body, got, want)
	}
}

// TestRouteKeyMatchesReference checks RouteKey against the reference
// implementation on random canonical and non-canonical bodies, truncated
// and corrupted ones, every mode and several prefix lengths.
func TestRouteKeyMatchesReference(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	for it := 0; it < iters; it++ {
		size := []int{50, 500, 3000, 12000}[r.Intn(4)]
		raw := randBody(r, size)
		bodies := [][]byte{raw}
		if c, err := Canonicalize(raw); err == nil {
			bodies = append(bodies, c)
		} else if it < 5 {
			t.Logf("not canonicalizable: %v", err)
		}
		for _, body := range bodies {
			for _, n := range []int{1024, 1031, 2048} {
				for _, mode := range []Mode{ModeAuto, ModeChat, ModeCompletion, ModeNative} {
					ko := KeyOptions{Mode: mode, PrefixLength: n}
					if r.Intn(4) == 0 {
						ko.Group = "grp"
					}
					sameRoute(t, body, ko)
				}
			}
			ko := KeyOptions{PrefixLength: 1024}
			if len(body) > 0 {
				sameRoute(t, body[:r.Intn(len(body))], ko)
				m := bytes.Clone(body)
				for k := r.Intn(4); k >= 0; k-- {
					m[r.Intn(len(m))] = mutations[r.Intn(len(mutations))]
				}
				sameRoute(t, m, ko)
			}
		}
	}
}

func BenchmarkRouteKeyReference(b *testing.B) {
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
				if _, err := refRouteKey(canon, KeyOptions{PrefixLength: n}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
