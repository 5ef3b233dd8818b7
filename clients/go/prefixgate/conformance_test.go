package prefixgate_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/prefixgate/prefixgate/clients/go/prefixgate"
)

type vector struct {
	Name              string     `json:"name"`
	Kind              string     `json:"kind"`
	Mode              string     `json:"mode"`
	Group             string     `json:"group"`
	PrefixLength      int        `json:"prefix_length"`
	Input             string     `json:"input"`
	InputBase64       string     `json:"input_base64"`
	Error             *wantError `json:"error"`
	Canonical         *string    `json:"canonical"`
	KeyError          *wantError `json:"key_error"`
	Key               string     `json:"key"`
	SpillKeys         []string   `json:"spill_keys"`
	KeyMode           string     `json:"key_mode"`
	RoutingTextLength int        `json:"routing_text_length"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("../../conformance/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Vectors []vector }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 60 {
		t.Fatalf("only %d vectors", len(f.Vectors))
	}
	return f.Vectors
}

func (v vector) input(t *testing.T) []byte {
	if v.InputBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(v.InputBase64)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []byte(v.Input)
}

// TestConformance runs every shared vector through the SDK: canonical bytes,
// key, spill keys and error offsets must all match.
func TestConformance(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			in := v.input(t)
			mode, err := prefixgate.ParseMode(v.Mode)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			if v.Kind == "build" {
				got, err = prefixgate.BuildJSONAs(in, mode)
			} else {
				got, err = prefixgate.Canonicalize(in, mode)
			}
			if v.Error != nil {
				checkSyntaxError(t, err, v.Error)
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !bytes.Equal(got, []byte(*v.Canonical)) {
				t.Fatalf("canonical bytes differ:\n got %q\nwant %q", got, *v.Canonical)
			}
			ri, err := prefixgate.Key(in, prefixgate.KeyOptions{Mode: mode, Group: v.Group, PrefixLength: v.PrefixLength})
			if v.Kind == "build" {
				ri, err = prefixgate.Key(got, prefixgate.KeyOptions{Mode: mode, Group: v.Group, PrefixLength: v.PrefixLength})
			}
			if v.KeyError != nil {
				checkSyntaxError(t, err, v.KeyError)
				return
			}
			if err != nil {
				t.Fatalf("key: %v", err)
			}
			if ri.KeyHex() != v.Key {
				t.Errorf("key %s, want %s", ri.KeyHex(), v.Key)
			}
			var spills []string
			for _, k := range ri.SpillKeys {
				spills = append(spills, prefixgate.FormatKey(k))
			}
			if len(spills) != len(v.SpillKeys) {
				t.Errorf("spill keys %v, want %v", spills, v.SpillKeys)
			}
			for i := range min(len(spills), len(v.SpillKeys)) {
				if spills[i] != v.SpillKeys[i] {
					t.Errorf("spill key %d %s, want %s", i, spills[i], v.SpillKeys[i])
				}
			}
			if ri.Mode.String() != v.KeyMode || ri.RoutingTextLen != v.RoutingTextLength {
				t.Errorf("mode %s, routing text length %d; want %s, %d", ri.Mode, ri.RoutingTextLen, v.KeyMode, v.RoutingTextLength)
			}
		})
	}
}

// wantError is a vector's expected rejection.
type wantError struct {
	Offset  int64  `json:"offset"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func checkSyntaxError(t *testing.T, err error, want *wantError) {
	t.Helper()
	var se *prefixgate.SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want offset %d (%s)", err, want.Offset, want.Code)
	}
	if se.Offset != want.Offset || se.Code() != want.Code || se.Reason != want.Message {
		t.Fatalf("error %v (%s), want offset %d: %s (%s)", err, se.Code(), want.Offset, want.Message, want.Code)
	}
}
