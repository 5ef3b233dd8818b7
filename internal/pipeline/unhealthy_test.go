package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/route"
)

// TestWhyNoneHealthyIsBounded: the message names a few unhealthy backends
// serving the model, each with its cause, leaves out healthy ones and
// those of other models, and counts the rest.
func TestWhyNoneHealthyIsBounded(t *testing.T) {
	var addrs []string
	for i := range 6 {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", 1+i))
	}
	pool, err := backends.NewPool(addrs, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var members []route.MemberStatus
	for i, b := range pool.Backends() {
		models := []string{"gpt-4o"}
		if i == 0 {
			models = []string{"other-model"}
		}
		if i < 5 {
			b.Observe(&backends.UnreachableError{Backend: b.Name, Err: errors.New("refused " + strings.Repeat("x", 5000))}, 0)
		}
		members = append(members, route.MemberStatus{Name: b.Name, Member: b, Healthy: b.Healthy(), Models: models})
	}
	got := WhyNoneHealthy(members, "gpt-4o")
	if strings.Contains(got, addrs[0]+" ") || strings.Contains(got, addrs[5]+" ") {
		t.Errorf("names a backend of another model or a healthy one: %q", got)
	}
	if n := strings.Count(got, " ejected 0s ago: request: refused x"); n != maxNamedUnhealthy {
		t.Errorf("names %d backends with their cause, want %d: %q", n, maxNamedUnhealthy, got)
	}
	if !strings.HasSuffix(got, "; and 1 more") {
		t.Errorf("does not count the backends left out: %q", got)
	}
	if len(got) > maxNamedUnhealthy*400 {
		t.Errorf("message of %d bytes is not bounded", len(got))
	}
	if got := WhyNoneHealthy(members, "other-model"); !strings.HasPrefix(got, addrs[0]+" ejected") {
		t.Errorf("WhyNoneHealthy(other-model) = %q, want it to name %s", got, addrs[0])
	}
	if got := WhyNoneHealthy(members, ""); strings.Count(got, "ejected") != maxNamedUnhealthy {
		t.Errorf("WhyNoneHealthy(\"\") = %q, want the first %d of every model", got, maxNamedUnhealthy)
	}
}
