"""Koordinator's koordlet flags this agent does not implement, accepted so its DaemonSet arguments start us.

koordlet parses its command line with Go's ``flag`` package (``-name`` or ``--name``, ``=value`` or the
next argument, a bare boolean meaning true) and adds klog's flags. :data:`NOT_IMPLEMENTED` lists every
koordlet flag (v1.8, ``cmd/koordlet``, ``pkg/koordlet/**/config.go``, the runtime-hook, audit and
prediction configs) that has no counterpart here; :data:`KLOG` lists klog's. :func:`take_foreign` removes
them from an argument list before click parses the rest, and returns one warning per flag named, so an
operator sees what has no effect here: never a crash, never silence. A klog flag asking for what we do
anyway (``--logtostderr=true``) needs no warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BOOL, VALUE = "bool", "value"

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

KLOG: Mapping[str, str] = {
    "logtostderr": BOOL,
    "alsologtostderr": BOOL,
    "log_dir": VALUE,
    "log_file": VALUE,
    "log_file_max_size": VALUE,
    "add_dir_header": BOOL,
    "skip_headers": BOOL,
    "skip_log_headers": BOOL,
    "one_output": BOOL,
    "stderrthreshold": VALUE,
    "vmodule": VALUE,
    "log_backtrace_at": VALUE,
    "log-flush-frequency": VALUE,
}
"""klog's flags (``klog.InitFlags``) but ``-v``, which the agent implements."""

NO_OP_VALUES: Mapping[str, str] = {"logtostderr": "true"}
"""Values that ask for what the agent does anyway (it always logs to stderr)."""


@dataclass(frozen=True, slots=True)
class Foreign:
    """A koordlet or klog flag found on the command line and its value (``true`` for a bare boolean)."""

    name: str
    value: str

    @property
    def warning(self) -> str:
        if self.name in KLOG:
            what = "klog flag; this agent logs to stderr, verbosity from -v"
        else:
            what = "koordlet flag not implemented by this agent"
        return f"--{self.name}={self.value}: accepted and ignored ({what})"


def _bool_text(text: str) -> str:
    return {"1": "true", "t": "true", "T": "true", "TRUE": "true", "0": "false", "f": "false"}.get(
        text, text.lower()
    )


def take_foreign(args: Sequence[str], own: set[str]) -> tuple[list[str], list[Foreign]]:
    """Split ``args`` into what click parses and the koordlet/klog flags it would refuse.

    ``own`` are the flag names the agent (or a plugin) declares: those always stay. A foreign flag in
    ``-name``/``--name`` form takes ``=value``, or the next argument unless it is a boolean. Everything
    after ``--`` is left alone.
    """
    table = {**NOT_IMPLEMENTED, **KLOG}
    kept: list[str] = []
    found: list[Foreign] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            kept.extend(args[i:])
            break
        dashes = len(arg) - len(arg.lstrip("-"))
        name, eq, value = arg.lstrip("-").partition("=")
        kind = table.get(name) if dashes in (1, 2) and name not in own else None
        if kind is None:
            kept.append(arg)
            i += 1
            continue
        if not eq:
            if kind == BOOL:
                value = "true"
            elif i + 1 < len(args):
                i += 1
                value = args[i]
        if kind == BOOL:
            value = _bool_text(value)
        found.append(Foreign(name, value))
        i += 1
    return kept, found


def warnings(found: Sequence[Foreign]) -> list[str]:
    """One warning per foreign flag named (the last value wins, as in Go), no-op values left out."""
    last: dict[str, Foreign] = {}
    for f in found:
        last.pop(f.name, None)
        last[f.name] = f
    return [f.warning for f in last.values() if NO_OP_VALUES.get(f.name) != f.value]
