package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/prefixgate/prefixgate/"

// TestImportGraph lists each package's transitive imports (tests
// excluded, as Tailscale's deptest does, unless an entry says tests) and
// fails on a forbidden one. An
// entry ending in "/" forbids every package under it; any other entry
// forbids the package and everything under it.
func TestImportGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, tc := range []struct {
		why       string
		pkgs      []string
		forbidden []string
		tests     bool // the packages' tests are held to it too
	}{
		{
			why:       "the Go SDK imports the normalizer",
			pkgs:      []string{mod + "normalize"},
			forbidden: []string{"net/http", "github.com/klauspost/compress", "google.golang.org/grpc", "connectrpc.com/", mod + "internal/", mod + "route", mod + "backends"},
		},
		{
			why:       "route picks over members and knows nothing of JSON bodies or HTTP",
			pkgs:      []string{mod + "route"},
			forbidden: []string{"net/http", "github.com/klauspost/compress", "google.golang.org/grpc", mod + "normalize", mod + "internal/", mod + "backends"},
		},
		{
			why:       "backends owns the replicas and satisfies route's interface without importing it",
			pkgs:      []string{mod + "backends"},
			forbidden: []string{"github.com/klauspost/compress", "google.golang.org/grpc", mod + "internal/", mod + "route", mod + "normalize", "k8s.io/"},
		},
		{
			why:       "a user of the SDK must not compile the server, the ring, the pool, the body decoder or grpc-go",
			pkgs:      []string{mod + "clients/go/prefixgate", mod + "clients/go/cmd/prefixgate-go"},
			forbidden: []string{mod + "internal/", mod + "backends", mod + "route", mod + "cmd/", "github.com/klauspost/compress", "google.golang.org/grpc"},
		},
		{
			why:       "the pipeline prepares requests for every front door and knows none of them, nor forwarding, nor an RPC library",
			pkgs:      []string{mod + "internal/pipeline"},
			forbidden: []string{mod + "internal/server", mod + "internal/epp", mod + "backends", "google.golang.org/grpc", "connectrpc.com/", "go.opentelemetry.io/"},
		},
		{
			why:       "the route table is data that every front door reads; it knows no HTTP, front door or router",
			pkgs:      []string{mod + "internal/routes"},
			forbidden: []string{"net/http", mod + "internal/server", mod + "internal/epp", mod + "internal/pipeline", mod + "route", mod + "backends"},
		},
		{
			why:       "the endpoint picker runs the request pipeline, not the HTTP server",
			pkgs:      []string{mod + "internal/epp"},
			forbidden: []string{mod + "internal/server"},
			tests:     true,
		},
		{
			why:       "the generated message and Connect packages the SDK imports carry no grpc-go stubs",
			pkgs:      []string{mod + "gen/prefixgate/v1", mod + "gen/prefixgate/v1/prefixgatev1connect"},
			forbidden: []string{"google.golang.org/grpc", "github.com/klauspost/compress", mod + "internal/", mod + "normalize"},
		},
		{
			why:       "the HTTP/1.1 front door and the backend client meet through backends/donehook only",
			pkgs:      []string{mod + "internal/h1front"},
			forbidden: []string{mod + "internal/server", mod + "backends/internal/", mod + "route", mod + "normalize", mod + "backends/vllmsim"},
		},
		{
			why:       "the binary ships without the image builder and the chart renderer, which only make and the tests run",
			pkgs:      []string{mod + "cmd/prefixgate"},
			forbidden: []string{"helm.sh/", "github.com/google/go-containerregistry", mod + "internal/image", mod + "deploy/"},
		},
		{
			why:       "the backend HTTP/1.1 client knows no front door, pool or router",
			pkgs:      []string{mod + "backends/internal/h1client"},
			forbidden: []string{mod + "internal/", mod + "route", mod + "normalize"},
		},
	} {
		t.Run(tc.pkgs[0], func(t *testing.T) {
			args := []string{"list", "-deps"}
			if tc.tests {
				args = append(args, "-test")
			}
			out, err := exec.Command("go", append(args, tc.pkgs...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 2 {
				t.Fatalf("go list printed %q", out)
			}
			for _, pkg := range deps {
				for _, f := range tc.forbidden {
					if pkg == strings.TrimSuffix(f, "/") || strings.HasPrefix(pkg, strings.TrimSuffix(f, "/")+"/") {
						t.Errorf("%s imports %s (%s)", tc.pkgs[0], pkg, tc.why)
					}
				}
			}
		})
	}
}
