package lint

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// match is a volatile value found in a text, as byte offsets into it.
type match struct {
	rule       string
	start, end int
	what       string // what was found, for the message
}

const (
	monthNames   = `(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?`
	weekdayNames = `(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tues|Tue|Wed|Thurs|Thu|Fri|Sat|Sun)\.?`
	ordinal      = `(?:st|nd|rd|th)?`
)

var (
	// ISO 8601 / RFC 3339 date-times, extended and basic form.
	isoDateTime = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?`)
	isoBasic    = regexp.MustCompile(`\b(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z?\b`)
	isoDate     = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	slashDate   = regexp.MustCompile(`\b(\d{1,2})[/.](\d{1,2})[/.](\d{4})\b|\b(\d{4})/(\d{1,2})/(\d{1,2})\b`)
	digitRun    = regexp.MustCompile(`\b\d{10}(?:\d{3})?\b`)
	// Written-out dates: "Monday, November 30, 2026", "Nov 30, 2026",
	// "30 November 2026", "the 30th of November, 2026", and a weekday with
	// a month and day but no year ("Monday, November 30").
	monthDayYear = regexp.MustCompile(`\b(?:` + weekdayNames + `,?\s+)?` + monthNames + `\s+(\d{1,2})` + ordinal + `,?\s+(\d{4})\b`)
	dayMonthYear = regexp.MustCompile(`\b(?:` + weekdayNames + `,?\s+)?(?:the\s+)?(\d{1,2})` + ordinal + `\s+(?:of\s+)?` + monthNames + `,?\s+(\d{4})\b`)
	weekdayMonth = regexp.MustCompile(`\b` + weekdayNames + `,?\s+` + monthNames + `\s+(\d{1,2})` + ordinal + `\b`)
	uuidRe       = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)
	hexRe        = regexp.MustCompile(`\b(?:0x)?[0-9a-fA-F]{16,}\b`)
	b64Re        = regexp.MustCompile(`[A-Za-z0-9+/_-]{20,}={0,2}`)
	prefixedID   = regexp.MustCompile(`\b(?:req|request|trace|span|sess|session|msg|run|call|chatcmpl|cmpl|evt|event|txn|corr|conv|thread|job|task|resp)[_-][A-Za-z0-9]{6,}\b`)
	labeledID    = regexp.MustCompile(`(?i)\b(?:x-)?(?:request|trace|correlation|session|span|conversation|message|run|transaction|invocation)[ _-]?id\b["']?\s*[:=]\s*["']?([A-Za-z0-9][A-Za-z0-9._:+=-]{5,})`)
	// Words before a date that make it part of a fixed document rather
	// than the request: "effective January 1, 2025", "last updated ...".
	fixedDateContext = regexp.MustCompile(`(?i)\b(?:effective|updated|revised|published|released|enacted|signed|founded|established|since|dated|amended|adopted|issued|copyright|©)\b[^.\n]{0,24}$`)
	phoneContext     = regexp.MustCompile(`(?i)(?:phone|tel|call|fax|mobile|cell|sms|whatsapp|isbn|zip|routing)\b[^\n]{0,16}$`)
)

// Plausible Unix times: 2008-01 .. 2039-09 in seconds, the same in
// milliseconds. Outside that, ten digits are more likely an amount or a
// phone number than a clock.
const (
	epochMin = 1_200_000_000
	epochMax = 2_200_000_000
)

func validDate(y, m, d int, years [2]int) bool {
	return y >= years[0] && y <= years[1] && m >= 1 && m <= 12 && d >= 1 && d <= 31
}

var (
	clockYears = [2]int{1970, 2100}
	// Dates without a time are volatile when they are recent; older ones
	// are history ("July 4, 1776") and stay put.
	dateYears = [2]int{2000, 2099}
)

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func monthNumber(s string) int {
	s = strings.TrimSuffix(s, ".")
	for i, m := range []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"} {
		if strings.HasPrefix(s, m) {
			return i + 1
		}
	}
	return 0
}

// boundaryOK reports whether a digit run at s[i:j] stands alone: not part
// of a decimal, a range, an amount, a phone number or a longer number.
func boundaryOK(s string, i, j int) bool {
	if i > 0 && strings.IndexByte("0123456789.,-+($#€£/:", s[i-1]) >= 0 {
		return false
	}
	if j < len(s) {
		c := s[j]
		if c >= '0' && c <= '9' || c == '-' || c == ')' {
			return false
		}
		if (c == '.' || c == ',') && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9' {
			return false
		}
	}
	return true
}

// findVolatile returns the volatile values in s, without overlaps, in order.
func findVolatile(s string) []match {
	var all matches
	all.timestamps(s)
	for _, m := range uuidRe.FindAllStringIndex(s, -1) {
		all.add(ruleUUID, m[0], m[1], "UUID")
	}
	all.dates(s)
	all.ids(s)
	return keepFirstRanked(all, len(s))
}

// matches collects the candidates of findVolatile, in the order of the
// rules' rank and, within a rule, in scan order.
type matches []match

func (all *matches) add(rule string, i, j int, what string) {
	*all = append(*all, match{rule: rule, start: i, end: j, what: what})
}

// timestamps adds ISO 8601 date-times and Unix times in seconds and
// milliseconds.
func (all *matches) timestamps(s string) {
	for _, m := range isoDateTime.FindAllStringSubmatchIndex(s, -1) {
		y, mo, d := atoi(s[m[2]:m[3]]), atoi(s[m[4]:m[5]]), atoi(s[m[6]:m[7]])
		if validDate(y, mo, d, clockYears) && atoi(s[m[8]:m[9]]) < 24 && atoi(s[m[10]:m[11]]) < 60 {
			all.add(ruleTimestamp, m[0], m[1], "ISO 8601 date-time")
		}
	}
	for _, m := range isoBasic.FindAllStringSubmatchIndex(s, -1) {
		if validDate(atoi(s[m[2]:m[3]]), atoi(s[m[4]:m[5]]), atoi(s[m[6]:m[7]]), clockYears) {
			all.add(ruleTimestamp, m[0], m[1], "ISO 8601 basic date-time")
		}
	}
	for _, m := range digitRun.FindAllStringIndex(s, -1) {
		if !boundaryOK(s, m[0], m[1]) || phoneContext.MatchString(s[max(0, m[0]-24):m[0]]) {
			continue
		}
		v, _ := strconv.ParseInt(s[m[0]:m[1]], 10, 64)
		switch {
		case m[1]-m[0] == 10 && v >= epochMin && v <= epochMax:
			all.add(ruleTimestamp, m[0], m[1], "Unix time in seconds")
		case m[1]-m[0] == 13 && v >= epochMin*1000 && v <= epochMax*1000:
			all.add(ruleTimestamp, m[0], m[1], "Unix time in milliseconds")
		}
	}
}

// dates adds ISO, numeric and written-out dates that are not part of a
// fixed document ("effective January 1, 2025").
func (all *matches) dates(s string) {
	fixed := func(i int) bool { return fixedDateContext.MatchString(s[max(0, i-40):i]) }
	for _, m := range isoDate.FindAllStringSubmatchIndex(s, -1) {
		if validDate(atoi(s[m[2]:m[3]]), atoi(s[m[4]:m[5]]), atoi(s[m[6]:m[7]]), dateYears) && !fixed(m[0]) && boundaryOK(s, m[0], m[1]) {
			all.add(ruleDate, m[0], m[1], "ISO 8601 date")
		}
	}
	for _, m := range slashDate.FindAllStringSubmatchIndex(s, -1) {
		var a, b, y int
		if m[2] >= 0 {
			a, b, y = atoi(s[m[2]:m[3]]), atoi(s[m[4]:m[5]]), atoi(s[m[6]:m[7]])
		} else {
			y, a, b = atoi(s[m[8]:m[9]]), atoi(s[m[10]:m[11]]), atoi(s[m[12]:m[13]])
		}
		if (validDate(y, a, b, dateYears) || validDate(y, b, a, dateYears)) && !fixed(m[0]) && boundaryOK(s, m[0], m[1]) {
			all.add(ruleDate, m[0], m[1], "numeric date")
		}
	}
	for _, re := range []*regexp.Regexp{monthDayYear, dayMonthYear} {
		for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
			d, y := atoi(s[m[2]:m[3]]), atoi(s[m[4]:m[5]])
			if validDate(y, 1, d, dateYears) && !fixed(m[0]) {
				all.add(ruleDate, m[0], m[1], "written-out date")
			}
		}
	}
	for _, m := range weekdayMonth.FindAllStringSubmatchIndex(s, -1) {
		if d := atoi(s[m[2]:m[3]]); d >= 1 && d <= 31 && !fixed(m[0]) {
			all.add(ruleDate, m[0], m[1], "weekday and date")
		}
	}
}

// ids adds labelled and prefixed ids, hex ids and random-looking base64
// tokens.
func (all *matches) ids(s string) {
	for _, m := range labeledID.FindAllStringSubmatchIndex(s, -1) {
		if v := s[m[2]:m[3]]; strings.ContainsAny(v, "0123456789") {
			all.add(ruleID, m[2], m[3], "request or trace id")
		}
	}
	for _, m := range prefixedID.FindAllStringIndex(s, -1) {
		if v := s[m[0]:m[1]]; strings.ContainsAny(v[strings.IndexAny(v, "_-"):], "0123456789") {
			all.add(ruleID, m[0], m[1], "prefixed id")
		}
	}
	for _, m := range hexRe.FindAllStringIndex(s, -1) {
		v := strings.TrimPrefix(s[m[0]:m[1]], "0x")
		if strings.ContainsAny(v, "0123456789") && strings.ContainsAny(strings.ToLower(v), "abcdef") {
			all.add(ruleID, m[0], m[1], "hex id")
		}
	}
	for _, m := range b64Re.FindAllStringIndex(s, -1) {
		if looksRandom(strings.TrimRight(s[m[0]:m[1]], "=")) {
			all.add(ruleID, m[0], m[1], "base64 token")
		}
	}
}

// keepFirstRanked resolves overlaps among matches in a text of n bytes:
// the first-listed match of each overlap wins (clocks, then UUIDs, dates,
// ids; in scan order within a rule). It returns them in text order.
func keepFirstRanked(all []match, n int) []match {
	rank := map[string]int{ruleTimestamp: 0, ruleUUID: 1, ruleDate: 2, ruleID: 3}
	sort.SliceStable(all, func(i, j int) bool { return rank[all[i].rule] < rank[all[j].rule] })
	// Kept matches are disjoint, so marking the bytes they cover and
	// testing a candidate's own bytes costs O(len(s)) per rule in all.
	// Comparing each candidate with every kept match instead was quadratic
	// in the number of matches, which a crafted prompt makes large.
	var kept []match
	covered := make([]uint64, (n+63)/64)
	isCovered := func(i int) bool { return covered[i>>6]&(1<<(i&63)) != 0 }
	for _, m := range all {
		overlaps := false
		for i := m.start; i < m.end; i++ {
			if isCovered(i) {
				overlaps = true
				break
			}
		}
		if !overlaps {
			for i := m.start; i < m.end; i++ {
				covered[i>>6] |= 1 << (i & 63)
			}
			kept = append(kept, m)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].start < kept[j].start })
	return kept
}

// looksRandom tells a base64 or base64url token from an identifier, a path
// or a word: it needs upper case, lower case and digits, and the character
// class must change often, as it does in random data (about two changes in
// three characters) and does not in camelCase or snake_case names.
func looksRandom(v string) bool {
	var up, lo, dg, changes int
	prev := -1
	for i := 0; i < len(v); i++ {
		c := v[i]
		cls := 3
		switch {
		case c >= 'A' && c <= 'Z':
			cls, up = 0, up+1
		case c >= 'a' && c <= 'z':
			cls, lo = 1, lo+1
		case c >= '0' && c <= '9':
			cls, dg = 2, dg+1
		}
		if prev >= 0 && cls != prev {
			changes++
		}
		prev = cls
	}
	return up >= 2 && lo >= 2 && dg >= 2 && float64(changes) >= 0.4*float64(len(v)-1)
}

var (
	datePhrase   = regexp.MustCompile(`(?i)\b(?:today(?:'s| is)?(?:\s+date)?(?:\s+is)?|the\s+date\s+today\s+is|(?:the\s+)?current\s+(?:date|time|date\s+and\s+time|datetime)(?:\s+is)?|now\s+is|it\s+is\s+(?:now|currently)|date)\s*[:=\-]?\s*`)
	placeholder  = regexp.MustCompile(`(?i)^(?:\{\{[^}]*\}\}|\{%[^%]*%\}|\{[a-z_]*(?:date|today|now|time)[a-z_]*\}|\$\{[^}]*\}|<[a-z_]*date[a-z_]*>|%\(?[a-z_]*date[a-z_]*\)?s?|\[(?:date|today|current[ _]date)\])`)
	templateDate = regexp.MustCompile(`strftime_now|Today Date:|date_string|now\(\)|datetime\.now|Date\.now|new Date\(`)
)

// injectionWindow is how far into a system prompt or template a date is
// still "at its start": early enough to sit inside any window.
const injectionWindow = 512

// findDateInjection returns where s puts today's date near its start: a
// phrase such as "Today is" or "Current date:" followed by a date, a clock
// or a template placeholder.
func findDateInjection(s string, vols []match) (match, bool) {
	head := s[:min(len(s), injectionWindow)]
	for _, m := range datePhrase.FindAllStringIndex(head, -1) {
		rest := s[m[1]:]
		if loc := placeholder.FindStringIndex(rest); loc != nil {
			end := m[1] + loc[1]
			return match{rule: ruleDateInjection, start: m[0], end: end, what: s[m[0]:end]}, true
		}
		for _, v := range vols {
			if (v.rule == ruleDate || v.rule == ruleTimestamp) && v.start >= m[1] && v.start <= m[1]+8 {
				return match{rule: ruleDateInjection, start: m[0], end: v.end, what: s[m[0]:v.end]}, true
			}
		}
	}
	if loc := templateDate.FindStringIndex(head); loc != nil {
		return match{rule: ruleDateInjection, start: loc[0], end: loc[1], what: s[loc[0]:loc[1]]}, true
	}
	return match{}, false
}
