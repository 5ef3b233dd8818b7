package kubetest

import (
	"fmt"
	"os"
	"testing"
)

var (
	shared   *Server
	unshared string // why shared is nil
	required bool
)

// Main starts the API server once for a test binary, runs its tests and
// stops it; TestMain calls os.Exit(kubetest.Main(m)). Without the
// binaries' variables the tests that need the server skip, or fail with
// PREFIXGATE_REQUIRE_KUBE set.
func Main(m *testing.M) int {
	required = os.Getenv(EnvRequire) != ""
	bins, ok := BinariesFromEnv()
	if !ok {
		unshared = fmt.Sprintf("no API server: %s and %s are unset (make kubetest builds them; make test-go sets them)", EnvEtcd, EnvAPIServer)
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		unshared = err.Error()
		return m.Run()
	}
	defer os.RemoveAll(dir)
	shared, err = Start(bins, dir)
	if err != nil {
		// Every test that needs it fails with this, skipping or not.
		unshared, required = err.Error(), true
		return m.Run()
	}
	defer shared.Stop()
	return m.Run()
}

// Shared returns the API server Main started. Without one the test skips
// with the reason, or fails when PREFIXGATE_REQUIRE_KUBE is set or the
// server failed to start.
func Shared(t testing.TB) *Server {
	t.Helper()
	if shared != nil {
		return shared
	}
	if unshared == "" {
		unshared = "kubetest.Main did not run: the package's TestMain must call it"
		required = true
	}
	if required {
		t.Fatal(unshared)
	}
	t.Skip(unshared)
	return nil
}
