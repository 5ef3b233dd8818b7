package prefixgate_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoServerDependencies keeps the SDK free of the router: a user who
// imports it must not compile the server, the ring or the backend pool,
// nor the compression library the server decodes request bodies with. The
// test lists the SDK's (and its CLI's) transitive imports, tests excluded,
// the way Tailscale's deptest does.
func TestNoServerDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".", "../cmd/prefixgate-go").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/prefixgate/prefixgate/"
	forbidden := []string{mod + "internal/", mod + "backends", mod + "route", mod + "cmd/", "github.com/klauspost/compress"}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("the SDK imports %s", pkg)
			}
		}
	}
}
