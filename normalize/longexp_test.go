package normalize

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestLongExponentLiterals: a long mantissa can bring a long exponent back
// into range. strconv.ParseFloat reads only five exponent digits and makes
// these 0; Python's float and JavaScript's Number read them right, and so
// must the reference.
func TestLongExponentLiterals(t *testing.T) {
	ones := strings.Repeat("1", 100000)
	zeros := strings.Repeat("0", 100000)
	for _, c := range []struct{ in, want string }{
		{"[" + ones + ".5e-100000]", "[0.1111111111111111]"},
		{"[-" + ones + "e-100002]", "[-0.0011111111111111111]"},
		{"[1" + strings.Repeat("0", 800) + "e-800]", "[1]"},
		{"[1" + strings.Repeat("0", 900) + "1e-901]", "[1]"},
		{"[-12" + strings.Repeat("3", 1000) + ".5e-1000]", "[-12.333333333333334]"},
		{"[0." + zeros + "1e100000]", "[0.1]"},
		{"[0." + zeros + "25E+0100001]", "[2.5]"},
		{"[0e-99999999999999999999]", "[0]"},
		{"[-0.0e123456789]", "[0]"},
	} {
		got, err := Canonicalize([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%.40s…: got %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"[1" + strings.Repeat("2", 964) + ".5e-540]", "[1e-1000000]", "[1e1000000]", "[-1E+99999999999999999999]", "[" + ones + "e-100400]", "[" + ones + "e-99600]"} {
		if err := Validate([]byte(in), Options{}); ErrorCode(err) != CodeNumberRange {
			t.Errorf("%.40s…: got %v, want number-range", in, err)
		}
	}
}

// TestParseReducedMatchesParseFloat checks the reduced path against
// ParseFloat where ParseFloat is right (exponents of at most five digits,
// at most 800 digits before the point), on random literals: long and short
// mantissas, leading and trailing zeros, halfway cases and subnormals.
func TestParseReducedMatchesParseFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
		}
		return string(b)
	}
	lits := []string{"0", "-0.0", "1", "5e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
		"1.7976931348623157e308", "1.7976931348623159e308", "9007199254740993", "0.1e1", "100e-2",
		"4.9406564584124654e-324", "2.2250738585072011e-308", "0." + strings.Repeat("0", 900) + "1e901"}
	for range 3000 {
		var lit string
		if rng.IntN(2) == 0 {
			lit = "-"
		}
		switch rng.IntN(3) {
		case 0:
			lit += strconv.Itoa(rng.IntN(10)) + "." + digits(1+rng.IntN(30))
		case 1:
			lit += "0." + strings.Repeat("0", rng.IntN(20)) + digits(1+rng.IntN(900))
		default:
			lit += "1" + digits(rng.IntN(780)) + "." + digits(1+rng.IntN(5)) + strings.Repeat("0", rng.IntN(5))
		}
		lits = append(lits, lit+"e"+strconv.Itoa(rng.IntN(1400)-700))
	}
	for _, lit := range lits {
		want, werr := strconv.ParseFloat(lit, 64)
		got, gerr := parseReduced([]byte(lit))
		if (werr != nil) != (gerr != nil) || (werr == nil && math.Float64bits(got) != math.Float64bits(want) && !(got == 0 && want == 0)) {
			t.Fatalf("%.60s…%s (%d bytes): got %v (%v), ParseFloat %v (%v)", lit, lit[max(0, len(lit)-12):], len(lit), got, gerr, want, werr)
		}
	}
}
