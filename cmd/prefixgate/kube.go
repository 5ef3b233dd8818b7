package main

import (
	"log/slog"

	"k8s.io/klog/v2"

	"github.com/prefixgate/prefixgate/internal/config"
	"github.com/prefixgate/prefixgate/internal/kubedisco"
)

// withKubernetes lets s's backends name k8s:// and inferencepool://
// sources, reached with s.Kubeconfig or the pod's service account; what
// client-go logs (a watch that failed and is retried) goes to log.
func withKubernetes(s config.Settings, log *slog.Logger) config.Settings {
	klog.SetSlogLogger(log)
	s.Server.Pool.Open = kubedisco.Opener(kubedisco.Config{Kubeconfig: s.Kubeconfig})
	return s
}
