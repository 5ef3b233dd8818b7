package kubedisco

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// Rules are the RBAC rules discovery needs in the namespace it watches,
// and all it needs: list and watch of EndpointSlices (k8s://), and of
// Pods and InferencePools (inferencepool://). A Role with them, bound to
// prefixgate's service account, suffices; the chart installs exactly
// these.
func Rules() []rbacv1.PolicyRule {
	verbs := []string{"list", "watch"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: verbs},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: verbs},
		{APIGroups: []string{InferencePools.Group}, Resources: []string{InferencePools.Resource}, Verbs: verbs},
	}
}
