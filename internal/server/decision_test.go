package server

import (
	"strings"
	"testing"

	pb "github.com/prefixgate/prefixgate/gen/prefixgate/v1"
	"github.com/prefixgate/prefixgate/route"
)

// TestEveryReasonHasADecision keeps the proto enum in step with route's
// reasons: a reason without a Decision value would reach clients as
// UNSPECIFIED.
func TestEveryReasonHasADecision(t *testing.T) {
	for r := route.ReasonAffinity; r <= route.ReasonPrefixMatch; r++ {
		got := decisionProtos[r]
		want := "DECISION_" + strings.ToUpper(strings.ReplaceAll(r.String(), "-", "_"))
		if got.String() != want {
			t.Errorf("reason %s maps to %s; want %s", r, got, want)
		}
	}
	if decisionProtos[route.ReasonPrefixMatch+1] != pb.Decision_DECISION_UNSPECIFIED {
		t.Errorf("an unknown reason should map to UNSPECIFIED")
	}
}
