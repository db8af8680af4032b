//go:build tools

// Package kubeperf holds no code: it requires kube-scheduler's own benchmark (scheduler_perf) so that
// `go test -c` can build its test packages from the module cache (bench/scheduler_perf.py does).
package kubeperf

import (
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/kubernetes/test/integration/scheduler_perf"
)
