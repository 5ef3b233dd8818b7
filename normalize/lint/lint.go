package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/prefixgate/prefixgate/normalize"
)

// Severity orders findings.
type Severity int

// Severities, in increasing order.
const (
	Info Severity = iota + 1
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return "unknown"
}

// ParseSeverity parses "info", "warning" or "error".
func ParseSeverity(s string) (Severity, error) {
	for _, v := range []Severity{Info, Warning, Error} {
		if v.String() == s {
			return v, nil
		}
	}
	return 0, fmt.Errorf("unknown severity %q (want info, warning or error)", s)
}

// MarshalText writes the severity's name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity's name.
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	*s = v
	return err
}

// Rule ids. They are stable: CI configurations and SARIF viewers key on them.
const (
	ruleInvalidJSON    = "invalid-json"
	ruleSchema         = "schema-mismatch"
	ruleTimestamp      = "volatile-timestamp"
	ruleDate           = "volatile-date"
	ruleUUID           = "volatile-uuid"
	ruleID             = "volatile-id"
	ruleMetadataFirst  = "metadata-before-prompt"
	ruleNoncanonical   = "noncanonical"
	ruleShortPrompt    = "short-prompt"
	ruleDateInjection  = "date-injection"
	ruleSplitGroup     = "split-group"
	ruleHotKey         = "hot-key"
	corpusRequestIndex = -1
)

// Rule describes one lint rule.
type Rule struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"` // the default; noncanonical is a warning with Direct
	Summary  string   `json:"summary"`
}

// Rules lists every rule, in the order reports and SARIF files list them.
var Rules = []Rule{
	{ruleInvalidJSON, Error, "The body is not valid I-JSON; the router rejects it."},
	{ruleSchema, Error, "The body does not fit the request mode (for example a chat body without messages)."},
	{ruleTimestamp, Warning, "A date-time or Unix time inside the routing window gives every request its own key."},
	{ruleDate, Warning, "A calendar date inside the routing window splits keys every day."},
	{ruleUUID, Warning, "A UUID inside the routing window gives every request its own key."},
	{ruleID, Warning, "A request, trace or session id, long hex or random token inside the routing window gives every request its own key."},
	{ruleMetadataFirst, Warning, "A native body sends volatile members ahead of the prompt; a byte-prefix router keys on them."},
	{ruleNoncanonical, Info, "The body is not in canonical form; equal requests serialized differently get different keys without the normalizer."},
	{ruleShortPrompt, Info, "The routing text is the whole prompt, so related requests that differ anywhere cannot share a key."},
	{ruleDateInjection, Warning, "A system prompt or chat template puts today's date near its start."},
	{ruleSplitGroup, Warning, "Requests whose routing texts are identical except for one small run, anywhere inside the window, get different keys."},
	{ruleHotKey, Warning, "One routing key carries more than twice a replica's fair share, and its requests differ after the window, so spilled load finds no cache."},
}

// Finding is one lint result.
type Finding struct {
	RuleID   string   `json:"rule_id"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	// RequestIndex is the 0-based index of the request in the corpus, -1
	// for a corpus-wide finding.
	RequestIndex int `json:"request_index"`
	// JSONPath is the path of the text, for example messages[0].content;
	// empty when the finding is about the whole body.
	JSONPath string `json:"json_path"`
	// Offset is the character offset inside that text; for invalid-json
	// and schema-mismatch it is the byte offset into the body.
	Offset int    `json:"offset"`
	Hint   string `json:"hint"`
	// BodyOffset is the byte offset into the request body as sent of the
	// position the finding points at.
	BodyOffset int `json:"body_offset"`
	// Requests lists the requests a corpus-wide finding is about; its
	// path and offsets point into the first of them.
	Requests []int `json:"requests,omitempty"`

	// kinds are a noncanonical finding's kinds, for the corpus summary.
	kinds []string
	// spanEnd is the character offset where a date-injection match ends,
	// to drop the volatile finding of the date it holds.
	spanEnd int
}

// Candidate is the expected outcome of one prefix length on the corpus.
type Candidate struct {
	PrefixLength int     `json:"prefix_length"`
	Keys         int     `json:"keys"`
	HitRate      float64 `json:"hit_rate"`
	MaxShare     float64 `json:"max_share_ratio"`
}

// Summary counts findings and says what prefix length suits the corpus.
type Summary struct {
	Requests     int `json:"requests"`
	Errors       int `json:"errors"`
	Warnings     int `json:"warnings"`
	Infos        int `json:"infos"`
	PrefixLength int `json:"prefix_length"`
	Replicas     int `json:"replicas"`
	// Keys is the number of distinct routing keys at PrefixLength.
	Keys                  int         `json:"keys"`
	SuggestedPrefixLength int         `json:"suggested_prefix_length"`
	ExpectedHitRate       float64     `json:"expected_hit_rate"`
	ExpectedMaxShareRatio float64     `json:"expected_max_share_ratio"`
	Candidates            []Candidate `json:"candidates"`
	// Advice says why there is no suggestion (SuggestedPrefixLength 0):
	// what splits the keys, instead of a length that would give no hits.
	Advice string `json:"advice,omitempty"`
}

// Report is the result of Check.
type Report struct {
	Findings []Finding `json:"findings"`
	Summary  Summary   `json:"summary"`
}

// MarshalJSON writes an empty finding list as [] rather than null.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	if r.Summary.Candidates == nil {
		r.Summary.Candidates = []Candidate{}
	}
	return json.Marshal(plain(r))
}

// Failed reports whether any finding reaches severity at.
func (r *Report) Failed(at Severity) bool {
	for _, f := range r.Findings {
		if f.Severity >= at {
			return true
		}
	}
	return false
}

// DefaultReplicas is the replica count the hot-key rule and the balance
// estimate assume when Options.Replicas is zero.
const DefaultReplicas = 7

// Options are the router settings the corpus is checked against.
type Options struct {
	// Mode is the request schema; ModeAuto detects it per request.
	Mode normalize.Mode
	// PrefixLength is the routing window N; 0 means 4096.
	PrefixLength int
	// Replicas is the number of replicas the router spreads over; 0 means 7.
	Replicas int
	// Direct says that traffic reaches a byte-prefix router without
	// prefixgate's normalizer: noncanonical findings become warnings.
	Direct bool
}

// ErrOption marks an out-of-range option.
var ErrOption = errors.New("invalid lint option")

func (o Options) withDefaults() (Options, error) {
	if o.PrefixLength == 0 {
		o.PrefixLength = normalize.DefaultPrefixLength
	}
	if o.PrefixLength < normalize.MinPrefixLength || o.PrefixLength > normalize.MaxPrefixLength {
		return o, fmt.Errorf("%w: prefix length %d is outside %d..%d", ErrOption, o.PrefixLength, normalize.MinPrefixLength, normalize.MaxPrefixLength)
	}
	if o.Replicas == 0 {
		o.Replicas = DefaultReplicas
	}
	if o.Replicas < 1 || o.Replicas > 4096 {
		return o, fmt.Errorf("%w: replicas %d is outside 1..4096", ErrOption, o.Replicas)
	}
	if o.Mode < normalize.ModeAuto || o.Mode > normalize.ModePooling {
		return o, fmt.Errorf("%w: unknown mode %d", ErrOption, o.Mode)
	}
	return o, nil
}

// request is what Check keeps of one valid body for the corpus rules.
type request struct {
	index int
	body  []byte
	canon []byte
	mode  normalize.Mode
	info  normalize.RouteInfo
	rt    *routingText
}

// Check lints a corpus of request bodies, in corpus order. It returns an
// error only for invalid options; a body that cannot be read is a finding.
func Check(bodies [][]byte, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	var reqs []*request
	for i, body := range bodies {
		fs, req := checkOne(i, body, opts)
		rep.Findings = append(rep.Findings, fs...)
		if req != nil {
			reqs = append(reqs, req)
		}
	}
	rep.Findings = collapseNoncanonical(rep.Findings, len(bodies))
	rep.Findings = append(rep.Findings, corpusFindings(reqs, opts)...)
	rep.Summary = summarize(reqs, opts)
	rep.Summary.Requests = len(bodies)
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		ka, kb := sortIndex(a), sortIndex(b)
		if ka != kb {
			return ka < kb
		}
		if a.RequestIndex < 0 {
			return false
		}
		return a.BodyOffset < b.BodyOffset
	})
	for _, f := range rep.Findings {
		switch f.Severity {
		case Error:
			rep.Summary.Errors++
		case Warning:
			rep.Summary.Warnings++
		case Info:
			rep.Summary.Infos++
		}
	}
	return rep, nil
}

// collapseNoncanonical replaces the noncanonical findings of two or more
// requests with one corpus-wide finding: a corpus written by one serializer
// (Python's json.dumps puts a space after every separator) is one fact,
// not one line per request.
func collapseNoncanonical(fs []Finding, total int) []Finding {
	var idx []int
	first := -1
	counts := map[string]int{}
	var kinds []string
	for i, f := range fs {
		if f.RuleID != ruleNoncanonical {
			continue
		}
		if first < 0 {
			first = i
		}
		idx = append(idx, f.RequestIndex)
		for _, k := range f.kinds {
			if counts[k] == 0 {
				kinds = append(kinds, k)
			}
			counts[k]++
		}
	}
	if len(idx) < 2 {
		return fs
	}
	f0 := fs[first]
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s in %d", k, counts[k]))
	}
	sum := Finding{
		RuleID: ruleNoncanonical, Severity: f0.Severity, RequestIndex: corpusRequestIndex, Requests: idx,
		JSONPath: f0.JSONPath, Offset: f0.Offset, BodyOffset: f0.BodyOffset, Hint: f0.Hint,
		Message: fmt.Sprintf("%d of %d requests are not in canonical form (%s); the first, request %d, has %s",
			len(idx), total, strings.Join(parts, ", "), f0.RequestIndex, strings.TrimPrefix(f0.Message, "not in canonical form: ")),
	}
	out := fs[:0]
	for _, f := range fs {
		if f.RuleID != ruleNoncanonical {
			out = append(out, f)
		}
	}
	return append(out, sum)
}

// sortIndex puts findings in request order, corpus-wide ones last.
func sortIndex(f Finding) int {
	if f.RequestIndex >= 0 {
		return f.RequestIndex
	}
	return int(^uint(0) >> 1)
}
