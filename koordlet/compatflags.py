"""Koordinator's koordlet flags this agent does not implement, accepted so its DaemonSet arguments start us.

koordlet parses its command line with Go's ``flag`` package (``-name`` or ``--name``, ``=value`` or the
next argument, a bare boolean meaning true) and adds klog's flags. :data:`NOT_IMPLEMENTED` lists every
koordlet flag (v1.8, ``cmd/koordlet``, ``pkg/koordlet/**/config.go``, the runtime-hook, audit and
prediction configs) that has no counterpart here; klog's are :data:`koordshared.runtime.goflags.KLOG`,
shared with the cluster processes, as is the mechanism: :func:`take_foreign` removes them from an
argument list before click parses the rest, and :func:`warnings` names each once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from koordshared.runtime import goflags

BOOL, VALUE = goflags.BOOL, goflags.VALUE

NOT_IMPLEMENTED: Mapping[str, str] = {
    # process / HTTP
    "kube-api-qps": VALUE,
    "kube-api-burst": VALUE,
    "configmap-name": VALUE,
    "configmap-namespace": VALUE,
    # host paths and runtimes
    "run-root-dir": VALUE,
    "containerd-endpoint": VALUE,
    "docker-endpoint": VALUE,
    "pouch-endpoint": VALUE,
    "default-runtime-type": VALUE,
    "hami-core-library-directory-path": VALUE,
    "pod-resources-proxy-path": VALUE,
    "xpu-device-infos-dir": VALUE,
    # states informer
    "report-interval": VALUE,
    "enable-pod-taskids": BOOL,
    "xpu-enforce-collect-from-device-infos": BOOL,
    # metrics advisor
    "collect-node-cpu-info-interval": VALUE,
    "collect-node-storage-info-interval": VALUE,
    "coldpage-collector-interval": VALUE,
    # metric cache (a Prometheus TSDB in koordlet; a ring buffer here)
    "metric-gc-interval-seconds": VALUE,
    "metric-expire-seconds": VALUE,
    "tsdb-retention-duration": VALUE,
    "tsdb-enable-prometheus-metric": BOOL,
    "tsdb-stripe-size": VALUE,
    "tsdb-wal-segment-size": VALUE,
    "tsdb-max-block-chunk-segment-size": VALUE,
    "tsdb-min-block-duration": VALUE,
    "tsdb-max-block-duration": VALUE,
    "tsdb-head-chunks-write-buffer-size": VALUE,
    # runtime hooks
    "runtime-hooks-network": VALUE,
    "runtime-hooks-addr": VALUE,
    "runtime-hooks-failure-policy": VALUE,
    "runtime-hooks-plugin-failure-policy": VALUE,
    "runtime-hooks-config-path": VALUE,
    "runtime-hooks-host-endpoint": VALUE,
    "runtime-hooks-disable-stages": VALUE,
    "enable-nri-runtime-hook": BOOL,
    "runtime-hooks-nri-connect-timeout": VALUE,
    "runtime-hooks-nri-backoff-duration": VALUE,
    "runtime-hooks-nri-backoff-cap": VALUE,
    "runtime-hooks-nri-backoff-factor": VALUE,
    "runtime-hooks-nri-backoff-steps": VALUE,
    "runtime-hooks-nri-socket-path": VALUE,
    "runtime-hooks-nri-plugin-name": VALUE,
    "runtime-hooks-nri-plugin-index": VALUE,
    # audit (ours is in memory, sized by --audit-max-events-limit)
    "audit-log-dir": VALUE,
    "audit-verbose": VALUE,
    "audit-max-disk-space-mb": VALUE,
    "audit-max-concurrent-readers": VALUE,
}
"""koordlet flags without a counterpart here, by how Go parses them."""

KLOG = goflags.KLOG
"""klog's flags (``klog.InitFlags``) but ``-v``, which the agent implements."""

Foreign = goflags.Foreign
_TABLES = (
    goflags.ForeignTable(NOT_IMPLEMENTED, "koordlet flag not implemented by this agent"),
    goflags.ForeignTable(KLOG, "klog flag; this agent logs to stderr, verbosity from -v"),
)


def take_foreign(args: Sequence[str], own: set[str]) -> tuple[list[str], list[Foreign]]:
    """Split ``args`` into what click parses and the koordlet/klog flags it would refuse
    (:func:`koordshared.runtime.goflags.take_foreign`); ``own`` are the agent's and plugins' names."""
    return goflags.take_foreign(args, _TABLES, own)


def warnings(found: Sequence[Foreign]) -> list[str]:
    """One warning per foreign flag named (the last value wins, as in Go), no-op values left out."""
    return goflags.warnings(found)
