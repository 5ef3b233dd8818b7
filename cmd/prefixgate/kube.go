package main

import (
	"github.com/prefixgate/prefixgate/internal/config"
	"github.com/prefixgate/prefixgate/internal/kubedisco"
)

// withKubernetes lets s's backends name k8s:// and inferencepool://
// sources, reached with s.Kubeconfig or the pod's service account.
func withKubernetes(s config.Settings) config.Settings {
	s.Server.Pool.Open = kubedisco.Opener(kubedisco.Config{Kubeconfig: s.Kubeconfig})
	return s
}
