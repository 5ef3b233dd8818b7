package kubedisco_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prefixgate/prefixgate/internal/kubedisco"
)

// serviceAccount creates a service account bound to a Role with rules (no
// Role when rules is nil) and returns a token for it.
func (c *cluster) serviceAccount(name string, rules []rbacv1.PolicyRule) string {
	c.t.Helper()
	ctx := context.Background()
	if _, err := c.cs.CoreV1().ServiceAccounts(c.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	if rules != nil {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
		if _, err := c.cs.RbacV1().Roles(c.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: c.ns}}}
		if _, err := c.cs.RbacV1().RoleBindings(c.ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
	tok, err := c.cs.CoreV1().ServiceAccounts(c.ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return tok.Status.Token
}

// TestLeastPrivilege: a service account whose Role has exactly Rules
// discovers both kinds of source; one with no Role, or with any one rule
// left out, fails with the API server's refusal, not silently.
func TestLeastPrivilege(t *testing.T) {
	c := newCluster(t)
	c.slice("vllm-a", "vllm", 8000, endpoint("192.0.2.10", true, false))
	c.inferencePool("llm", "vllm", 8000)
	c.pod("p0", "192.0.2.20", true, map[string]string{"app": "vllm"})
	specs := []string{"k8s://" + c.ns + "/vllm:http", "inferencepool://" + c.ns + "/llm"}
	want := [][]string{{"http://192.0.2.10:8000"}, {"http://192.0.2.20:8000"}}

	tok := c.serviceAccount("prefixgate", kubedisco.Rules())
	var changes atomic.Int64
	for i, spec := range specs {
		eventually(t, open(t, kubedisco.Config{REST: c.srv.ConfigFor(tok)}, spec, &changes), want[i]...)
	}

	// refused says which specs fail, each with the API server's refusal.
	refused := func(token string) []bool {
		out := make([]bool, len(specs))
		for i, spec := range specs {
			d := open(t, kubedisco.Config{REST: c.srv.ConfigFor(token)}, spec, &changes)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := d.Discover(ctx)
			cancel()
			if err != nil && (!strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), spec)) {
				t.Errorf("%s: error does not name the spec and say it is forbidden: %v", spec, err)
			}
			out[i] = err != nil
		}
		return out
	}
	if got := refused(c.serviceAccount("nobody", nil)); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("a service account with no Role: failed %v, want both", got)
	}
	// Without EndpointSlices k8s:// fails; without Pods or InferencePools,
	// inferencepool:// does.
	wantFailed := [][]bool{{true, false}, {false, true}, {false, true}}
	for i, r := range kubedisco.Rules() {
		less := slices.Delete(kubedisco.Rules(), i, i+1)
		if got := refused(c.serviceAccount("less-"+r.Resources[0], less)); !slices.Equal(got, wantFailed[i]) {
			t.Errorf("without the rule for %v: failed %v, want %v", r.Resources, got, wantFailed[i])
		}
	}
}
