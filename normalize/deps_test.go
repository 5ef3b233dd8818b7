package normalize_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the import graph of the normalizer: the Go SDK imports it, so it carries no HTTP, compression or RPC library. It lists the
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
	forbidden := []string{"net/http", "github.com/klauspost/compress", "google.golang.org/grpc", "connectrpc.com/", mod + "internal/", mod + "route", mod + "backends"}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list printed %q", out)
	}
	for _, pkg := range deps {
		for _, f := range forbidden {
			if pkg == f || strings.HasPrefix(pkg, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("normalize imports %s", pkg)
			}
		}
	}
}
