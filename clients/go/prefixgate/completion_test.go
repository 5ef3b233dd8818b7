package prefixgate_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/prefixgate/prefixgate/clients/go/prefixgate"
)

func TestBuildCompletion(t *testing.T) {
	s := prefixgate.CompletionSpec{
		Model:      "vllmsim/tiny",
		Prompt:     "Once upon a time",
		Parameters: map[string]json.RawMessage{"temperature": json.RawMessage(`1.0`), "max_tokens": json.RawMessage(`4`)},
	}
	body, ri, err := prefixgate.BuildCompletionKey(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"vllmsim/tiny","prompt":"Once upon a time","max_tokens":4,"temperature":1}`; string(body) != want {
		t.Errorf("body %s, want %s", body, want)
	}
	s.Group = "tenant-a"
	grouped, ri2, err := prefixgate.BuildCompletionKey(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"vllmsim/tiny","prompt":"Once upon a time","max_tokens":4,"temperature":1,"prompt_cache_key":"tenant-a"}`; string(grouped) != want {
		t.Errorf("grouped body %s, want %s", grouped, want)
	}
	if ri.Key == ri2.Key {
		t.Error("group did not change the key")
	}
	in, err := s.CompletionInput()
	if err != nil {
		t.Fatal(err)
	}
	if in.GetModel() != s.Model || in.GetPrompt() != s.Prompt || in.GetGroup() != "tenant-a" ||
		in.GetExtraJson() != `{"max_tokens":4,"prompt_cache_key":"tenant-a","temperature":1.0}` {
		t.Errorf("CompletionInput %v", in)
	}

	for name, bad := range map[string]prefixgate.CompletionSpec{
		"parameters.prompt": {Model: "m", Parameters: map[string]json.RawMessage{"prompt": json.RawMessage(`"x"`)}},
		"model":             {Prompt: "p"},
		"group":             {Model: "m", Group: "a\nb"},
		"parameters.t":      {Model: "m", Parameters: map[string]json.RawMessage{"t": json.RawMessage(`1.`)}},
	} {
		_, err := bad.CompletionInput()
		var se *prefixgate.SpecError
		if !errors.As(err, &se) || se.Field != name {
			t.Errorf("%s: err %v, want a SpecError on %s", name, err, name)
		}
	}
}

func TestErrorHelpers(t *testing.T) {
	busy := connect.NewError(connect.CodeResourceExhausted, errors.New("all candidates saturated"))
	busy.Meta().Set("Retry-After", "2")
	if d, ok := prefixgate.RetryAfter(busy); !ok || d != 2*time.Second {
		t.Errorf("RetryAfter = %v %v, want 2s", d, ok)
	}
	if !prefixgate.IsRetryable(busy) || prefixgate.Code(busy) != connect.CodeResourceExhausted {
		t.Error("saturated: want retryable ResourceExhausted")
	}
	tooLarge := connect.NewError(connect.CodeResourceExhausted, errors.New("body too large"))
	if prefixgate.IsRetryable(tooLarge) {
		t.Error("ResourceExhausted without Retry-After is not retryable")
	}
	if _, ok := prefixgate.RetryAfter(tooLarge); ok {
		t.Error("RetryAfter without metadata")
	}
	if !prefixgate.IsRetryable(connect.NewError(connect.CodeUnavailable, errors.New("x"))) {
		t.Error("Unavailable is retryable")
	}
	if prefixgate.IsRetryable(connect.NewError(connect.CodeNotFound, errors.New("model not served"))) {
		t.Error("NotFound (a model no backend serves) is not retryable")
	}
	if prefixgate.IsRetryable(connect.NewError(connect.CodeInvalidArgument, errors.New("x"))) || prefixgate.IsRetryable(errors.New("local")) {
		t.Error("InvalidArgument and local errors are not retryable")
	}
}
