package image

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// BuildFlags are the go build flags of the image's binary: no cgo (so it
// is static and needs no libc in the image), no machine paths in it, no
// symbol table (stack traces keep their function names). The version is
// stamped by go build itself (the module version, or the VCS revision,
// which -buildvcs=auto records even where GOFLAGS turns it off), as
// cmd/prefixgate/version.go reads it.
var BuildFlags = []string{"build", "-trimpath", "-buildvcs=auto", "-ldflags=-s -w"}

// BuildBinary builds ./cmd/prefixgate of the module at root for linux and
// goarch into out.
func BuildBinary(ctx context.Context, root, out, goarch string) error {
	args := append(append([]string{}, BuildFlags...), "-o", out, "./cmd/prefixgate")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("image: go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// Describe reads what the image says about a binary: the version it
// prints (it is run with --version, so it must be for this machine) and
// the VCS revision go build stamped in it, and checks that it is static.
func Describe(ctx context.Context, binary string) (version, revision string, err error) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return "", "", fmt.Errorf("image: %s: %w", binary, err)
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			revision = s.Value
		case s.Key == "CGO_ENABLED" && s.Value != "0":
			return "", "", fmt.Errorf("image: %s was built with CGO_ENABLED=%s; the image has no libc", binary, s.Value)
		case s.Key == "GOOS" && s.Value != "linux":
			return "", "", fmt.Errorf("image: %s is built for %s, not linux", binary, s.Value)
		case s.Key == "GOARCH" && s.Value != runtime.GOARCH:
			return "", "", fmt.Errorf("image: %s is built for %s; it must run here (%s) to print its version", binary, s.Value, runtime.GOARCH)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "--version")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("image: %s --version: %v: %s", binary, err, stderr.String())
	}
	line := strings.TrimSpace(stdout.String())
	version, ok := strings.CutPrefix(line, "prefixgate ")
	if !ok || version == "" || strings.ContainsAny(version, " \n") {
		return "", "", fmt.Errorf("image: %s --version printed %q, not \"prefixgate VERSION\"", binary, line)
	}
	return version, revision, nil
}
