package backends_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the import graph of the backend pool: it must not reach into the server or the router, and forwards plain HTTP. It lists the
// package's transitive imports, tests excluded.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/prefixgate/prefixgate/"
	forbidden := []string{"github.com/klauspost/compress", "google.golang.org/grpc", mod + "internal/", mod + "route", mod + "normalize"}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list printed %q", out)
	}
	for _, pkg := range deps {
		for _, f := range forbidden {
			if pkg == f || strings.HasPrefix(pkg, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("backends imports %s", pkg)
			}
		}
	}
}
