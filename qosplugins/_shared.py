"""Plugin-side helpers shared by the built-in QoS plugins: cpu lists, quota values, metric reads.

Everything here sees only :mod:`koordlet.api` (plus stdlib and prometheus_client), like the plugins
themselves; import-linter checks it. Values read back from cgroups are parsed defensively: a plugin must
never act on a half-read or unexpected value, so unparseable input returns ``None`` and the caller skips.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from koordlet import api

CFS_PERIOD_US = 100_000
"""The kubelet's CFS period: quotas are expressed against it (1 core = 100000 us)."""

MIN_BE_QUOTA_US = 2_000
"""Floor for any BE quota koordlet writes (``beMinQuota``); below 1000 us the kernel refuses it."""

UNLIMITED = -1

WINDOW_LAST_SECONDS = 2.0
"""Koordlet queries ``last`` samples over a 2 s window unless a strategy says otherwise."""


def parse_quota(text: str | None) -> int | None:
    """A CFS quota in microseconds, ``-1`` for unlimited, as the host reader gives it on v1 and v2."""
    value = parse_int(text)
    if value is None:
        return None
    # The kernel reads any negative v1 quota back as -1: treat them all as unlimited.
    return UNLIMITED if value < 0 else value


def parse_int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def read_cpuset(ctx: api.PluginContext, cgroup_dir: str) -> frozenset[int] | None:
    """The CPUs in ``cgroup_dir``'s ``cpuset.cpus`` now, ``None`` when that cannot be read or parsed."""
    text = read_value(ctx, "cpuset.cpus", cgroup_dir)
    if text is None:
        return None
    try:
        return api.parse_cpuset(text)
    except api.InvalidValue:
        return None


def read_value(ctx: api.PluginContext, resource: str, cgroup_dir: str) -> str | None:
    """``ctx.host.read`` where any failure means "unknown" (``None``), which every caller skips.

    The host reader gives ``None`` for a vanished cgroup and raises a ``KoordletError`` for a file the
    kernel lacks or content it cannot parse: one odd cgroup costs one skipped write, not the whole tick.
    """
    try:
        return ctx.host.read(resource, cgroup_dir)
    except (api.KoordletError, OSError) as err:
        ctx.logger.debug("read %s of %s failed: %s", resource, cgroup_dir, err)
        return None


def report_refused(ctx: api.PluginContext, results: Sequence[api.UpdateResult]) -> None:
    """Log each write the executor refused (it has counted and audited them already)."""
    for r in results:
        if not r.ok:
            ctx.logger.warning(
                "%s=%s on %s refused: %s", r.update.resource, r.update.value, r.update.cgroup_dir, r.error
            )


def threshold_enabled(ctx: api.PluginContext) -> bool:
    """The runtime switch of koordlet's BE strategies: ``resourceUsedThresholdWithBE.enable``."""
    return bool(ctx.states.node_slo().resource_used_threshold_with_be.enable)


def be_cgroup_dirs(pods: Sequence[api.PodInfo]) -> frozenset[str]:
    """The cgroup dirs of the BE pods and their containers, as the pods name them."""
    return frozenset(
        d
        for p in pods
        if p.is_best_effort
        for d in (p.cgroup_dir, *(c.cgroup_dir for c in p.containers))
        if d
    )


def capacity_milli(ctx: api.PluginContext) -> int:
    """Node CPU capacity in millicores; falls back to the online CPU count when the node is unknown."""
    node = ctx.states.node()
    if node is not None and node.cpu_capacity_milli > 0:
        return node.cpu_capacity_milli
    return len(ctx.host.cpu_topology()) * 1000


def last_value(
    ctx: api.PluginContext,
    metric: str,
    labels: dict[str, str] | None = None,
    window: float = WINDOW_LAST_SECONDS,
) -> float | None:
    result = ctx.metrics.query(metric, window=window, agg="last", labels=labels)
    if result is None or result.count <= 0 or not math.isfinite(result.value):
        return None
    return result.value


def be_cpu_labels(allocation: str) -> dict[str, str]:
    """Labels of the ``node_be`` series (millicores) for ``usage``, ``request`` or ``real-limit``."""
    return {"be_resource": "cpu", "be_allocation": allocation}


EVICTED = "evicted"
"""The reason Koordinator's eviction strategies give the evictor (its ``EvictedStr``): the ``reason`` label
of ``koordlet_pod_eviction``; the strategy is named in the message (:func:`evict_reason`)."""


def evict_reason(gate: str) -> str:
    """Koordlet's eviction reason string, which dashboards and audit readers match on."""
    return f"trigger by koordlet feature {gate}"


def bound_cpuset_cores(total_cpus: int) -> int:
    """The smallest cpuset BE may be left with: 2 CPUs, or all of them on a smaller machine."""
    return min(2, total_cpus)


def dirs_by_depth(root: str, dirs: Sequence[str]) -> list[list[str]]:
    """Split ``list_cgroups(root, 2)`` into ``[[root], [pods], [containers]]`` by depth below ``root``."""
    levels: list[list[str]] = [[], [], []]
    base = root.rstrip("/")
    for d in dirs:
        path = d.rstrip("/")
        if path == base:
            depth = 0
        elif path.startswith(base + "/"):
            depth = path[len(base) + 1 :].count("/") + 1
        else:
            continue
        if depth < len(levels):
            levels[depth].append(d)
    return levels
