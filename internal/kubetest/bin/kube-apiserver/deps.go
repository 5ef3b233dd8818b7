//go:build tools

// Package deps pins, for go mod tidy, what the kube-apiserver command of
// k8s.io/kubernetes imports; internal/kubetest/build.sh builds that command
// from this module with `go build k8s.io/kubernetes/cmd/kube-apiserver`.
package deps

import (
	_ "k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
)
