package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/normalize"
)

func TestCleanCorpusHasNoWarnings(t *testing.T) {
	bodies, _ := readJSONL(t, "testdata/clean.jsonl")
	if len(bodies) < 20 {
		t.Fatalf("clean corpus has %d prompts, want at least 20", len(bodies))
	}
	for _, n := range []int{1024, 4096, 16384} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rep, err := Check(bodies, Options{PrefixLength: n})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range rep.Findings {
				if f.Severity >= Warning {
					t.Errorf("request %d: false positive %s at %s@%d: %s", f.RequestIndex, f.RuleID, f.JSONPath, f.Offset, f.Message)
				}
			}
			if rep.Summary.Requests != len(bodies) {
				t.Errorf("summary counts %d requests, want %d", rep.Summary.Requests, len(bodies))
			}
		})
	}
}

// TestRoutingTextMatchesNormalizer guards the one thing lint recomputes:
// the routing text's layout must have the length package normalize keys on.
func TestRoutingTextMatchesNormalizer(t *testing.T) {
	var bodies [][]byte
	for _, f := range []string{"testdata/clean.jsonl", "testdata/corpus.jsonl"} {
		b, _ := readJSONL(t, f)
		bodies = append(bodies, b...)
	}
	checked := 0
	for i, body := range bodies {
		canon, mode, err := normalize.AppendCanonical(nil, body, normalize.Options{})
		if err != nil {
			continue
		}
		if mode == normalize.ModeAuto {
			mode = normalize.ModeNative
		}
		if _, err := normalize.RouteKey(canon, normalize.KeyOptions{Mode: mode}); err != nil {
			continue // schema mismatch: a finding, no routing text
		}
		ctree, _, err := parseTree(canon)
		if err != nil {
			t.Fatalf("body %d: canonical form does not parse: %v", i, err)
		}
		rtree, _, err := parseTree(body)
		if err != nil {
			t.Fatalf("body %d: does not parse: %v", i, err)
		}
		rt := buildRoutingText(mode, canon, ctree, rtree)
		for _, n := range []int{1024, 4096, 65536} {
			ri, err := normalize.RouteKey(canon, normalize.KeyOptions{Mode: mode, PrefixLength: n})
			if err != nil {
				t.Fatalf("body %d: %v", i, err)
			}
			if got := min(rt.units, n); got != ri.RoutingTextLen {
				t.Errorf("body %d (%s), N=%d: lint's routing text is %d long, the normalizer's %d", i, mode, n, got, ri.RoutingTextLen)
			}
		}
		// Every segment's text must sit in the routing text where the
		// segment says (unescaped segments only; escaped ones hold JSON).
		for _, s := range rt.segs {
			if s.escaped || mode == normalize.ModeNative {
				continue
			}
			at := len(rt.cut(s.start))
			if !strings.HasPrefix(rt.text[at:], s.text) {
				t.Errorf("body %d: segment %s is not at position %d", i, s.path, s.start)
			}
		}
		checked++
	}
	if checked < 40 {
		t.Fatalf("checked %d bodies", checked)
	}
}

func TestVolatileDetectors(t *testing.T) {
	tests := []struct {
		text string
		want []string // "rule:matched text"
	}{
		{"Now: 2026-11-30T14:22:01Z", []string{"volatile-timestamp:2026-11-30T14:22:01Z"}},
		{"at 2026-11-30 14:22:01.123+01:00 sharp", []string{"volatile-timestamp:2026-11-30 14:22:01.123+01:00"}},
		{"stamp 20261130T142201Z", []string{"volatile-timestamp:20261130T142201Z"}},
		{"epoch 1764512521 s", []string{"volatile-timestamp:1764512521"}},
		{"epoch 1764512521123 ms", []string{"volatile-timestamp:1764512521123"}},
		{"Monday, November 30, 2026 it is", []string{"volatile-date:Monday, November 30, 2026"}},
		{"on 30 November 2026.", []string{"volatile-date:30 November 2026"}},
		{"by Nov 30, 2026", []string{"volatile-date:Nov 30, 2026"}},
		{"today, Monday, November 30", []string{"volatile-date:Monday, November 30"}},
		{"date 2026-11-30.", []string{"volatile-date:2026-11-30"}},
		{"date 11/30/2026.", []string{"volatile-date:11/30/2026"}},
		{"id 550e8400-e29b-41d4-a716-446655440000", []string{"volatile-uuid:550e8400-e29b-41d4-a716-446655440000"}},
		{"commit 9fceb02d0ae598e95dc970b74767f19372d61af8", []string{"volatile-id:9fceb02d0ae598e95dc970b74767f19372d61af8"}},
		{"token aGVsbG8gd29ybGQgdGhpcyBpcyBh9Xk2LqZ", []string{"volatile-id:aGVsbG8gd29ybGQgdGhpcyBpcyBh9Xk2LqZ"}},
		{"x-request-id: abc123def456", []string{"volatile-id:abc123def456"}},
		{"see req_01HZX3K9Q2", []string{"volatile-id:req_01HZX3K9Q2"}},
		{"trace-id = 7f3a9c21b04e", []string{"volatile-id:7f3a9c21b04e"}},
		// Not volatile.
		{"See Section 4.2.1 and clause 12.3.", nil},
		{"It costs $1,299.00 or €1.299,00 per seat.", nil},
		{"Requires v2.3.1, Python 3.11, Go 1.22.4, Node.js 20.11.1.", nil},
		{"We have offered this since 2019, and in 2023 we expanded.", nil},
		{"Call +1 (800) 555-0199, 212-555-0142, +44 20 7946 0958 or 1-800-555-0199.", nil},
		{"Call 2125550142 any time.", nil},
		{"Colours #ff0000, #1a73e8 and #6b7280.", nil},
		{"ISBN 0131103628 and ISBN 978-1-4493-7332-0.", nil},
		{"Effective January 1, 2025; last updated March 15, 2025.", nil},
		{"Signed on July 4, 1776.", nil},
		{"Revenue was 4200000000 dollars.", nil},
		{"func getUserAccountSettingsV2Response() in src/components/UserProfile2/index.tsx", nil},
		{"MAX_RETRY_COUNT_FOR_API_V2 and AbstractSingletonProxyFactoryBean", nil},
		{"Regulation (EU) 2016/679, Article 6(1)(b).", nil},
		{"Model meta-llama/Llama-3.1-8B-Instruct, order 48213, room 2.14.", nil},
		{"Invoice INV-2024-0042, VAT ID DE123456789.", nil},
		{"the request-response cycle and trace_the_path", nil},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			var got []string
			for _, m := range findVolatile(tt.text) {
				got = append(got, m.rule+":"+tt.text[m.start:m.end])
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("findVolatile(%q)\n got %q\nwant %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestDateInjection(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{"Today is Monday, November 30, 2026. You are helpful.", true},
		{"Current date: 2026-11-30\nYou are helpful.", true},
		{"Today's date is {{ today }}. Be brief.", true},
		{"The current date is ${date}.", true},
		{"Cutting Knowledge Date: December 2023\nToday Date: {{ strftime_now('%d %b %Y') }}", true},
		{"You are helpful. Today we focus on refunds.", false},
		{"Cutting Knowledge Date: December 2023. You are helpful.", false},
		{"Privacy policy effective date: January 1, 2025.", false},
		{strings.Repeat("Stable instructions. ", 40) + "Today is Monday, November 30, 2026.", false},
	}
	for _, tt := range tests {
		_, got := findDateInjection(tt.text, findVolatile(tt.text))
		if got != tt.want {
			t.Errorf("findDateInjection(%.60q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

func TestWindowAndFinalMessage(t *testing.T) {
	long := strings.Repeat("Stable shared instructions. ", 60) // 1680 characters
	bodies := [][]byte{
		// Inside the window.
		fmt.Appendf(nil, `{"messages":[{"content":"Started 2026-11-30T14:22:01Z. %s","role":"system"},{"content":"hi","role":"user"}]}`, long),
		// Past a 1024-character window, inside a 4096 one.
		fmt.Appendf(nil, `{"messages":[{"content":"%sStarted 2026-11-30T14:22:01Z.","role":"system"},{"content":"hi","role":"user"}]}`, long),
		// In the final message, which is not part of the key.
		[]byte(`{"messages":[{"content":"Be brief.","role":"system"},{"content":"It is 2026-11-30T14:22:01Z","role":"user"}]}`),
	}
	count := func(n int) []int {
		rep, err := Check(bodies, Options{PrefixLength: n})
		if err != nil {
			t.Fatal(err)
		}
		per := make([]int, len(bodies))
		for _, f := range rep.Findings {
			if f.RuleID == ruleTimestamp {
				per[f.RequestIndex]++
			}
		}
		return per
	}
	if got := count(1024); fmt.Sprint(got) != "[1 0 0]" {
		t.Errorf("N=1024: timestamp findings per request %v, want [1 0 0]", got)
	}
	if got := count(4096); fmt.Sprint(got) != "[1 1 0]" {
		t.Errorf("N=4096: timestamp findings per request %v, want [1 1 0]", got)
	}
}

func TestFindingLocations(t *testing.T) {
	// An escaped character before the value moves the body offset but not
	// the character offset.
	body := []byte(`{"messages":[{"content":"caf\u00e9 \ud83d\ude00 id 550e8400-e29b-41d4-a716-446655440000","role":"system"},{"content":"q","role":"user"}]}`)
	rep, err := Check([][]byte{body}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var f *Finding
	for i := range rep.Findings {
		if rep.Findings[i].RuleID == ruleUUID {
			f = &rep.Findings[i]
		}
	}
	if f == nil {
		t.Fatal("no uuid finding")
	}
	if f.JSONPath != "messages[0].content" || f.Offset != 10 {
		t.Errorf("finding at %s@%d, want messages[0].content@10", f.JSONPath, f.Offset)
	}
	if got := string(body[f.BodyOffset : f.BodyOffset+8]); got != "550e8400" {
		t.Errorf("body offset %d points at %q", f.BodyOffset, got)
	}
}

func TestNoncanonicalDirect(t *testing.T) {
	body := []byte(`{"prompt": "x", "model": "m"}`)
	for _, direct := range []bool{false, true} {
		rep, err := Check([][]byte{body}, Options{Direct: direct})
		if err != nil {
			t.Fatal(err)
		}
		var got []Finding
		for _, f := range rep.Findings {
			if f.RuleID == ruleNoncanonical {
				got = append(got, f)
			}
		}
		want := Info
		if direct {
			want = Warning
		}
		if len(got) != 1 || got[0].Severity != want || !strings.Contains(got[0].Message, "whitespace") || !strings.Contains(got[0].Message, "member order") {
			t.Errorf("direct=%v: noncanonical findings %+v, want one naming whitespace and member order at %s", direct, got, want)
		}
	}
	// A canonical body has no such finding.
	rep, _ := Check([][]byte{[]byte(`{"model":"m","prompt":"x"}`)}, Options{Direct: true})
	for _, f := range rep.Findings {
		if f.RuleID == ruleNoncanonical {
			t.Errorf("canonical body: %s", f.Message)
		}
	}
}

// TestTrailingLineEnd checks that one line end after the body, as a file
// ends, is not reported as whitespace, while more than one is.
func TestTrailingLineEnd(t *testing.T) {
	const body = `{"model":"m","prompt":"x"}`
	cases := []struct {
		tail  string
		bytes int // whitespace bytes reported; 0: no noncanonical finding
	}{
		{"", 0},
		{"\n", 0},
		{"\r\n", 0},
		{"\n\n", 2},
		{"\r\n\r\n", 4},
		{" \n", 2},
		{"\r", 1},
		{"\t", 1},
	}
	for _, c := range cases {
		rep, err := Check([][]byte{[]byte(body + c.tail)}, Options{Direct: true})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, f := range rep.Findings {
			if f.RuleID == ruleNoncanonical {
				msgs = append(msgs, f.Message)
			}
		}
		want := []string(nil)
		if c.bytes > 0 {
			want = []string{fmt.Sprintf("not in canonical form: whitespace (%d byte%s between tokens)", c.bytes, plural(c.bytes))}
		}
		if fmt.Sprint(msgs) != fmt.Sprint(want) {
			t.Errorf("body + %q: noncanonical %q, want %q", c.tail, msgs, want)
		}
	}
}

func TestSuggestedPrefixLength(t *testing.T) {
	// Forty single-message chats: a 1500-character document shared by
	// groups of four, then a per-request tail at character 1500..; a window
	// of 1024 merges all of them into one key (hot), 2048 and longer keep
	// each request apart. The suggestion must leave 1024.
	var bodies [][]byte
	for i := 0; i < 40; i++ {
		doc := strings.Repeat(fmt.Sprintf("Shared manual text, chapter %c. ", 'A'+i/4), 1) + strings.Repeat("Stable words here. ", 80)
		text := doc[:1500] + fmt.Sprintf(" Question number %d about topic %c.", i, 'A'+i%26)
		b, _ := json.Marshal(map[string]any{"prompt": text})
		bodies = append(bodies, b)
	}
	rep, err := Check(bodies, Options{PrefixLength: 1024})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if len(s.Candidates) != len(candidateLengths) {
		t.Fatalf("candidates %v", s.Candidates)
	}
	if s.SuggestedPrefixLength == 0 || s.ExpectedMaxShareRatio > maxShareBound {
		t.Errorf("suggested %d with max share %.2f: %+v", s.SuggestedPrefixLength, s.ExpectedMaxShareRatio, s.Candidates)
	}
	if s.Candidates[0].Keys >= s.Candidates[1].Keys {
		t.Errorf("1024 should merge more than 2048: %+v", s.Candidates)
	}
}

func TestHotKeyAndSplitGroup(t *testing.T) {
	bodies, _ := readJSONL(t, "testdata/corpus.jsonl")
	rep, err := Check(bodies, corpusOptions)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int{}
	for _, f := range rep.Findings {
		if f.RequestIndex == corpusRequestIndex {
			got[f.RuleID] = f.Requests
		}
	}
	if fmt.Sprint(got[ruleSplitGroup]) != "[9 10 11]" {
		t.Errorf("split-group requests %v, want [9 10 11]", got[ruleSplitGroup])
	}
	// Requests 12..21 share one system prompt and differ only in the final
	// question: the shared-document case the router serves by spilling.
	if got, ok := got[ruleHotKey]; ok {
		t.Errorf("hot-key on a shared document: requests %v", got)
	}
}

// chatBody is a chat request whose messages alternate user and assistant
// after a system prompt; the last message is the question.
func chatBody(t *testing.T, system string, turns ...string) []byte {
	t.Helper()
	msgs := []map[string]string{{"role": "system", "content": system}}
	for i, c := range turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]string{"role": role, "content": c})
	}
	b, err := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pythonStyle re-serializes a body the way Python's json.dumps does by
// default: a space after every comma and colon.
func pythonStyle(b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		panic(err)
	}
	out, _ := json.Marshal(v)
	s := strings.ReplaceAll(string(out), `","`, `", "`)
	s = strings.ReplaceAll(s, `":"`, `": "`)
	return []byte(s)
}

func TestHotKeyOnlyWhenSpilledLoadFindsNoCache(t *testing.T) {
	manual := strings.Repeat("The X200 manual: reset, passwords, parental controls, firmware. ", 20) // 1,280 characters
	var shared, diverging [][]byte
	for i := 0; i < 12; i++ {
		q := fmt.Sprintf("Question %d?", i)
		shared = append(shared, chatBody(t, manual, q))
		// An earlier turn that differs per conversation sits past the
		// 1,024-character window: the key merges conversations whose
		// texts part later.
		diverging = append(diverging, chatBody(t, manual, fmt.Sprintf("My earlier ticket was number %d, about the %s.", i*37, []string{"router", "modem", "switch"}[i%3]), "Noted.", q))
	}
	opts := Options{PrefixLength: 1024, Replicas: 7}
	for _, tc := range []struct {
		name   string
		bodies [][]byte
		hot    bool
	}{{"one shared document", shared, false}, {"texts differ after the window", diverging, true}} {
		rep, err := Check(tc.bodies, opts)
		if err != nil {
			t.Fatal(err)
		}
		var hot []Finding
		for _, f := range rep.Findings {
			if f.RuleID == ruleHotKey {
				hot = append(hot, f)
			}
		}
		if (len(hot) > 0) != tc.hot {
			t.Errorf("%s: hot-key findings %+v, want hot=%v", tc.name, hot, tc.hot)
		}
		if tc.hot && len(hot) == 1 && !strings.Contains(hot[0].Hint, "--prefix-length 2048") {
			t.Errorf("%s: hint %q should name --prefix-length 2048", tc.name, hot[0].Hint)
		}
	}
}

// TestVolatileTimeAtTheFront is the worst case of a split: twenty requests
// that share 7,000 characters but start with a clock time, which no
// volatile detector matches. split-group must find them, and the summary
// must not suggest a length that gives no hits.
func TestVolatileTimeAtTheFront(t *testing.T) {
	doc := strings.Repeat("The dispatch manual covers routing of service calls and escalation. ", 110)[:7000]
	var bodies [][]byte
	for i := 0; i < 20; i++ {
		system := fmt.Sprintf("Ticket opened %02d:%02d by the dispatcher. %s", 8+i/6, (i*7)%60, doc)
		bodies = append(bodies, pythonStyle(chatBody(t, system, fmt.Sprintf("What is step %d?", i))))
	}
	rep, err := Check(bodies, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var split, noncanon []Finding
	for _, f := range rep.Findings {
		switch f.RuleID {
		case ruleSplitGroup:
			split = append(split, f)
		case ruleNoncanonical:
			noncanon = append(noncanon, f)
		}
	}
	if len(split) != 1 || len(split[0].Requests) != 20 || split[0].JSONPath != "messages[0].content" || split[0].Offset != len("Ticket opened ") {
		t.Errorf("split-group %+v, want one finding over 20 requests at messages[0].content@14", split)
	}
	if rep.Summary.SuggestedPrefixLength != 0 || !strings.Contains(rep.Summary.Advice, "messages[0].content@") {
		t.Errorf("summary suggests %d (hit rate %.2f), advice %q; want no suggestion and where the keys split",
			rep.Summary.SuggestedPrefixLength, rep.Summary.ExpectedHitRate, rep.Summary.Advice)
	}
	// json.dumps output: one corpus-wide noncanonical line, not 40.
	if len(noncanon) != 1 || noncanon[0].RequestIndex != corpusRequestIndex || len(noncanon[0].Requests) != 20 {
		t.Errorf("noncanonical findings %d (%+v), want one corpus-wide finding over 20 requests", len(noncanon), noncanon)
	}
}

func TestInjectedDateIsReportedOnce(t *testing.T) {
	body := chatBody(t, "You are helpful. Current date: 2026-11-30T08:00:00Z. Answer briefly.", "hi")
	rep, err := Check([][]byte{body}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, f := range rep.Findings {
		if f.Severity >= Warning {
			rules = append(rules, f.RuleID)
		}
		if strings.Contains(f.Message, "character ") {
			t.Errorf("%s: message carries a second position: %s", f.RuleID, f.Message)
		}
	}
	if fmt.Sprint(rules) != "[date-injection]" {
		t.Errorf("warnings %v, want only date-injection", rules)
	}
}

func TestInvalidInputIsAFinding(t *testing.T) {
	rep, err := Check([][]byte{[]byte(`{"a":1,}`), []byte(""), []byte(`{"a":1,"a":2}`)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Errors != 3 || !rep.Failed(Error) {
		t.Fatalf("errors %d, findings %+v", rep.Summary.Errors, rep.Findings)
	}
	if f := rep.Findings[0]; f.RuleID != ruleInvalidJSON || f.Offset != 7 {
		t.Errorf("first finding %+v, want invalid-json at byte 7", f)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{{PrefixLength: 100}, {PrefixLength: 70000}, {Replicas: -1}, {Mode: normalize.Mode(9)}} {
		if _, err := Check(nil, o); !errors.Is(err, ErrOption) {
			t.Errorf("Check(%+v) = %v, want ErrOption", o, err)
		}
	}
	rep, err := Check(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"findings": []`) {
		t.Errorf("empty report: %s", b.String())
	}
}

func TestParseSeverity(t *testing.T) {
	for _, s := range []Severity{Info, Warning, Error} {
		got, err := ParseSeverity(s.String())
		if err != nil || got != s {
			t.Errorf("ParseSeverity(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseSeverity("fatal"); err == nil {
		t.Error("ParseSeverity(fatal) succeeded")
	}
}

// TestPathsStayBounded: a long member name above many values must not give
// every value a copy of it (memory quadratic in the body).
func TestPathsStayBounded(t *testing.T) {
	name := strings.Repeat("n", 64<<10)
	body := []byte(`{"prompt":"x","` + name + `":[` + strings.TrimSuffix(strings.Repeat(`{"a":1},`, 2000), ",") + `]}`)
	root, _, err := parseTree(body)
	if err != nil {
		t.Fatal(err)
	}
	longest, paths := 0, map[string]bool{}
	root.walk(func(n *node) {
		longest = max(longest, len(n.path))
		paths[n.path] = true
	})
	if longest > maxPathLen+24 {
		t.Errorf("longest path %d bytes, want at most %d", longest, maxPathLen+24)
	}
	if len(paths) != 3+2000*2 {
		t.Errorf("%d distinct paths, want %d: cut paths must stay distinct", len(paths), 3+2000*2)
	}
	if _, err := Check([][]byte{body}, Options{}); err != nil {
		t.Fatal(err)
	}
}

// allocatedBy returns the bytes allocated while f runs.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestWorkGrowsLinearly: attacker-shaped bodies (many strings in tools,
// many short volatile-looking values, many members) cost work in
// proportion to their size. Allocation is the measure (deterministic,
// unlike time): ten times the input must not cost a hundred times the
// bytes, as a quadratic loop would.
func TestWorkGrowsLinearly(t *testing.T) {
	shapes := map[string]func(n int) []byte{
		"tools of many strings": func(n int) []byte {
			return []byte(`{"model":"m","tools":[` + strings.TrimSuffix(strings.Repeat(`"x",`, n), ",") + `],"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`)
		},
		"many ten-digit runs": func(n int) []byte {
			// n/4 of them, so that the larger body still fits the window
			// (a scan stops at the window).
			return []byte(`{"prompt":"` + strings.Repeat("1764512521 ", n/4) + `"}`)
		},
		"many members": func(n int) []byte {
			var b strings.Builder
			b.WriteString(`{"prompt":"p","parameters":{`)
			for i := 0; i < n; i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `"k%d":%d`, n-i, i)
			}
			b.WriteString(`}}`)
			return []byte(b.String())
		},
	}
	for name, shape := range shapes {
		small, large := shape(2000), shape(20000)
		cost := func(body []byte) uint64 {
			return allocatedBy(func() {
				if _, err := Check([][]byte{body, body}, Options{PrefixLength: 65536}); err != nil {
					t.Fatal(err)
				}
			})
		}
		cost(small) // warm up
		a, b := cost(small), cost(large)
		if ratio := float64(b) / float64(a); ratio > 30 {
			t.Errorf("%s: 10× the input allocates %.0f× the bytes (%d vs %d): superlinear", name, ratio, b, a)
		}
	}
}

// BenchmarkFindVolatile measures the volatile scan on a window full of
// Unix times, the most matches per byte: the time per match must not grow
// with the number of matches (docs/lint.md has the numbers).
func BenchmarkFindVolatileMatches(b *testing.B) {
	for _, n := range []int{500, 5000} {
		s := strings.Repeat("1764512521 ", n)
		b.Run(fmt.Sprintf("matches=%d", n), func(b *testing.B) {
			for b.Loop() {
				if got := len(findVolatile(s)); got != n {
					b.Fatalf("%d matches, want %d", got, n)
				}
			}
		})
	}
}

// TestNoncanonicalNameQuoted checks that a member name in a finding is
// quoted by the rule of the normalizer's error messages.
func TestNoncanonicalNameQuoted(t *testing.T) {
	rep, err := Check([][]byte{[]byte(`{"model":"m","prompt":"x","\u00e9\u2028":1}`)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const want = `not in canonical form: escapes (1 string escaped differently from RFC 8785, first the member name "\u00e9\u2028")`
	for _, f := range rep.Findings {
		if f.RuleID == ruleNoncanonical {
			if f.Message != want {
				t.Errorf("message %q, want %q", f.Message, want)
			}
			return
		}
	}
	t.Errorf("no noncanonical finding in %+v", rep.Findings)
}
