package prefixgate

import (
	"fmt"
	"net/http"

	"connectrpc.com/connect"
)

// Flow control: every request belongs to a flow, a fairness id (whose share
// of the fleet it counts against) and an objective (a name the router's
// flow_control.objectives maps to a priority). The call options below send
// them as the headers the router reads, on Connect, gRPC and gRPC-Web alike;
// FlowHeaders gives the same headers for a REST call.
const (
	// FairnessIDHeader carries the fairness id.
	FairnessIDHeader = "x-llm-d-inference-fairness-id"
	// ObjectiveHeader carries the objective's name.
	ObjectiveHeader = "x-llm-d-inference-objective"
	// MaxFlowValueBytes bounds a fairness id and an objective name.
	MaxFlowValueBytes = 128
)

// OptionError is a call option the client refused before sending anything.
type OptionError struct {
	Option string // "fairness id" or "objective"
	Reason string
}

func (e *OptionError) Error() string { return "call option " + e.Option + ": " + e.Reason }

// CallOption sets something on one call: WithFairnessID, WithObjective.
type CallOption func(*callOptions)

type callOptions struct {
	fairnessID, objective string
	fairnessSet, objSet   bool
}

// WithFairnessID sends id as the call's fairness id: calls with the same id
// share one fair share of the fleet while it is saturated. 1 to 128 bytes
// of printable ASCII, no space at either end (CheckFairnessID). With API
// keys configured the router uses the key's tenant instead.
func WithFairnessID(id string) CallOption {
	return func(o *callOptions) { o.fairnessID, o.fairnessSet = id, true }
}

// WithObjective sends name as the call's objective, which the router maps to
// a priority (flow_control.objectives; a negative priority is sheddable).
// 1 to 128 bytes of ASCII letters, digits, '-', '_' and '.'
// (CheckObjective); a name the router's configuration does not define is
// refused by the router with InvalidArgument.
func WithObjective(name string) CallOption {
	return func(o *callOptions) { o.objective, o.objSet = name, true }
}

// CheckFairnessID reports whether id is a valid fairness id, the rule the
// router applies to the header: 1 to MaxFlowValueBytes bytes of printable
// ASCII (0x20-0x7e) with no space at either end.
func CheckFairnessID(id string) error {
	const what = "fairness id"
	if err := checkLength(what, id); err != nil {
		return err
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return &OptionError{Option: what, Reason: fmt.Sprintf("has a non-printable byte 0x%02x at %d", c, i)}
		}
	}
	if id[0] == ' ' || id[len(id)-1] == ' ' {
		return &OptionError{Option: what, Reason: "starts or ends with a space"}
	}
	return nil
}

// CheckObjective reports whether name is a valid objective name, the rule
// the router applies to flow_control.objectives: 1 to MaxFlowValueBytes
// bytes of ASCII letters, digits, '-', '_' and '.'.
func CheckObjective(name string) error {
	const what = "objective"
	if err := checkLength(what, name); err != nil {
		return err
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return &OptionError{Option: what, Reason: fmt.Sprintf("byte 0x%02x at %d is not a letter, digit, '-', '_' or '.'", c, i)}
		}
	}
	return nil
}

func checkLength(what, v string) error {
	if v == "" {
		return &OptionError{Option: what, Reason: "is empty"}
	}
	if len(v) > MaxFlowValueBytes {
		return &OptionError{Option: what, Reason: fmt.Sprintf("is %d bytes, over %d", len(v), MaxFlowValueBytes)}
	}
	return nil
}

// FlowHeaders returns the headers that carry a fairness id and an objective
// on a REST call (either may be empty: that header is left out), or the
// error naming the bad value.
func FlowHeaders(fairnessID, objective string) (http.Header, error) {
	var opts []CallOption
	if fairnessID != "" {
		opts = append(opts, WithFairnessID(fairnessID))
	}
	if objective != "" {
		opts = append(opts, WithObjective(objective))
	}
	h := http.Header{}
	if err := applyOptions(h, opts); err != nil {
		return nil, err
	}
	return h, nil
}

// applyOptions checks opts and sets their headers on h.
func applyOptions(h http.Header, opts []CallOption) error {
	var o callOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.fairnessSet {
		if err := CheckFairnessID(o.fairnessID); err != nil {
			return err
		}
		h.Set(FairnessIDHeader, o.fairnessID)
	}
	if o.objSet {
		if err := CheckObjective(o.objective); err != nil {
			return err
		}
		h.Set(ObjectiveHeader, o.objective)
	}
	return nil
}

// newRequest wraps msg in a Connect request carrying the options' headers.
func newRequest[T any](msg *T, opts []CallOption) (*connect.Request[T], error) {
	req := connect.NewRequest(msg)
	if err := applyOptions(req.Header(), opts); err != nil {
		return nil, err
	}
	return req, nil
}
