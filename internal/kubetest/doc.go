// Package kubetest runs a real Kubernetes API server for tests: etcd and
// kube-apiserver, built from their Go modules by build.sh (the Makefile's
// kubetest target) into a cache directory outside the work tree, started
// once per test binary by Main from TestMain on loopback ports, with token
// authentication, RBAC authorization, service-account token signing and
// the InferencePool CRD (inference.networking.k8s.io/v1) applied.
//
// Tests reach it through Shared, which skips with the reason when the
// binaries' variables (PREFIXGATE_ETCD, PREFIXGATE_KUBE_APISERVER) are
// absent and fails instead when PREFIXGATE_REQUIRE_KUBE is set, as make's
// test-go sets it.
package kubetest
