package normalize

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// decodeValue reads JSON with numbers kept as literals.
func decodeValue(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// sameNumber compares two literals by value: integer literals exactly, other
// literals as doubles (the value RFC 8785 keeps).
func sameNumber(a, b string) bool {
	isInt := func(s string) bool { return !strings.ContainsAny(s, ".eE") }
	if isInt(a) && isInt(b) {
		x, ok1 := new(big.Int).SetString(a, 10)
		y, ok2 := new(big.Int).SetString(b, 10)
		return ok1 && ok2 && x.Cmp(y) == 0
	}
	if isInt(a) != isInt(b) {
		// 1.0 becomes 1: compare exactly as rationals when one is an integer
		// literal, and as doubles otherwise.
		fa, _ := strconv.ParseFloat(a, 64)
		fb, _ := strconv.ParseFloat(b, 64)
		return fa == fb
	}
	fa, _ := strconv.ParseFloat(a, 64)
	fb, _ := strconv.ParseFloat(b, 64)
	return fa == fb
}

func equalValues(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalValues(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && sameNumber(string(x), string(y))
	default:
		return a == b
	}
}

func assertSameValue(t testing.TB, in, out []byte) {
	t.Helper()
	if !equalValues(decodeValue(t, in), decodeValue(t, out)) {
		t.Errorf("value changed:\n in: %s\nout: %s", in, out)
	}
}
