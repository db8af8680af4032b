"""The numbers behind ``BECPUSuppress``: usage split, BE budget, CFS quota steps and the LS demand probe.

Pure functions of samples and the current quota, so the arithmetic is tested without a host. The
:class:`DemandProbe` answers a weakness of koordlet's controller: under the ``cfsQuota`` policy a controller
fed with LS's *observed* usage can settle where contended LS never shows more demand (BE bursts on LS's CPU
inside each period). While BE is using its whole quota and some LS pod is running, the probe lowers the quota
for ``hold`` seconds. If LS wanted more it takes the room, the next budgets see the higher LS usage and BE
stays lower; if not, the normal +10 %/tick growth gives BE its quota back. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from koordlet import api
from qosplugins import _shared
from qosplugins.cpusuppress import cpuset as _cpuset

POLICY_CPUSET = "cpuset"
POLICY_CFS_QUOTA = "cfsQuota"
HYSTERESIS_FRACTION = 0.01
"""Quota changes below 1 % of capacity are not written (koordlet)."""
STEP_FRACTION = 0.1
"""Quota grows at most 10 % of capacity per tick (koordlet); the probe shrinks by the same step."""
FAST_WINDOW_SECONDS = 1.0
"""Fast samples older than this are stale (the sampler runs every ~40 ms while armed)."""
ARM_BE_FRACTION = 0.01
"""BE pods using less of the node than this have nothing for the fast path to take back."""
ARM_REACH_FRACTION = 0.5
"""The fast path is armed while a rise of this share of the node would cross the suppress threshold."""
ARM_HOLD_SECONDS = 10.0
"""Once armed, the fast path stays armed this long after it last mattered: BE throttled to its quota
floor (1 % of the node) hovers around :data:`ARM_BE_FRACTION`, and each re-arm re-learns the noise band
(half a second blind), so an arm that followed every tick missed spikes (``bench/reaction.py`` on a busy
machine: armed and disarmed every one or two seconds)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """The split of node CPU the budget is computed from (millicores)."""

    capacity_milli: int
    node_used_milli: float
    pod_non_be_milli: float
    host_app_non_be_milli: float
    be_pods_milli: float
    system_milli: float
    reserved_milli: int

    @property
    def non_be_milli(self) -> float:
        return self.pod_non_be_milli + self.host_app_non_be_milli + self.system_milli

    @property
    def non_be_floor_milli(self) -> float:
        """What is known non-BE from per-pod samples alone (a lower bound for the fast estimate)."""
        return self.pod_non_be_milli + self.host_app_non_be_milli + self.reserved_milli


@dataclass(frozen=True, slots=True)
class Decision:
    """The last applied decision: what the fast path compares against and re-uses."""

    at: float
    policy: str
    be_dir: str
    capacity_milli: int
    threshold_percent: int
    min_percent: int | None
    non_be_milli: float
    non_be_floor_milli: float
    pools: _cpuset.CPUPools


def explain(
    decision: Decision,
    budget: float,
    path: str,
    decided_at: float,
    usage: Usage | None,
    previous: api.JSONObject,
    band: float | None = None,
) -> api.JSONObject:
    """The numbers behind ``budget`` for ``BECPUSuppress.status`` (``koordlet top``): a new dict, so the
    HTTP thread never sees a half-written one. The fast path (no ``usage``) keeps the last periodic split."""
    split: api.JSONObject = (
        {
            "nodeUsedMilli": round(usage.node_used_milli),
            "lsPodsMilli": round(usage.pod_non_be_milli),
            "lsHostAppsMilli": round(usage.host_app_non_be_milli),
            "systemMilli": round(usage.system_milli),
            "reservedMilli": usage.reserved_milli,
            "bePodsMilli": round(usage.be_pods_milli),
        }
        if usage is not None
        else {k: v for k, v in previous.items() if k.endswith("Milli") and k != "budgetMilli"}
    )
    return {
        "active": True,
        "policy": decision.policy,
        "path": path,
        "decidedAt": decided_at,
        "capacityMilli": decision.capacity_milli,
        "thresholdPercent": decision.threshold_percent,
        "minPercent": decision.min_percent,
        **split,
        "nonBEMilli": round(decision.non_be_milli),
        "budgetMilli": round(budget),
        "noiseBandMilli": None if band is None else round(band),
    }


def write_reason(decision: Decision, budget: float, fast: bool) -> str:
    """The audit log's reason for a BE write; the fast path's writes say so (a spike the fast path caught
    is told from one the periodic tick did)."""
    reason = f"BE budget {budget:.0f}m, non-BE {decision.non_be_milli:.0f}m"
    return f"{reason}; fast sample" if fast else reason


def be_budget_milli(
    capacity_milli: int, threshold_percent: int, min_percent: int | None, non_be: float
) -> float:
    """Koordlet's ``calculateBESuppressCPU``: the CPU BE may use, in millicores."""
    budget = capacity_milli * threshold_percent / 100.0 - non_be
    if min_percent is not None:
        budget = max(budget, capacity_milli * min_percent / 100.0)
    return budget


def measure_usage(ctx: api.PluginContext, pods: Sequence[api.PodInfo]) -> Usage | None:
    """The node CPU split from the last 1 s samples; ``None`` before the first node sample."""
    node_cores = _shared.last_value(ctx, api.NODE_CPU_USAGE)
    if node_cores is None:
        return None
    all_pods = non_be_pods = 0.0
    for pod in pods:
        cores = _shared.last_value(ctx, api.POD_CPU_USAGE, {"pod_uid": pod.uid})
        if cores is None:
            continue
        all_pods += cores * 1000
        # Stricter than koordlet: anything not BE counts as LS demand (a mislabelled pod is protected).
        if not pod.is_best_effort:
            non_be_pods += cores * 1000
    apps = non_be_apps = 0.0
    for app in ctx.states.node_slo().host_applications:
        cores = _shared.last_value(ctx, api.HOST_APP_CPU_USAGE, {"host_app_name": app.name})
        if cores is None:
            continue
        apps += cores * 1000
        if not (app.qos is api.QOSClass.BE and app.cgroup_base == "KubepodsBesteffort"):
            non_be_apps += cores * 1000
    node = ctx.states.node()
    reserved = _cpuset.reserved_milli(node)
    node_milli = node_cores * 1000
    return Usage(
        capacity_milli=_shared.capacity_milli(ctx),
        node_used_milli=node_milli,
        pod_non_be_milli=non_be_pods,
        host_app_non_be_milli=non_be_apps,
        be_pods_milli=all_pods - non_be_pods,
        system_milli=max(api.system_usage(node_milli, all_pods, apps), float(reserved)),
        reserved_milli=reserved,
    )


def non_be_pod_in(be_dir: str, pods: Sequence[api.PodInfo]) -> api.PodInfo | None:
    """A pod that is not BE but sits in the BE tier (suppressing the tier would confine it too)."""
    prefix = be_dir.rstrip("/") + "/"
    for pod in pods:
        if not pod.is_best_effort and pod.cgroup_dir.startswith(prefix):
            return pod
    return None


def fast_non_be(ctx: api.PluginContext) -> float | None:
    """``node - BE tier`` from the fast sampler (millicores).

    Falls back to the 1 s ``node_cpu_usage``/``node_be`` pair when the fast series are absent or stale (an
    advisor without the fast sampler, or one not armed); ``None`` when neither pair is complete.
    """
    node = _shared.last_value(ctx, api.NODE_CPU_USAGE_FAST, window=FAST_WINDOW_SECONDS)
    be = _shared.last_value(ctx, api.BE_CPU_USAGE_FAST, window=FAST_WINDOW_SECONDS)
    if node is not None and be is not None:
        return (node - be) * 1000
    node = _shared.last_value(ctx, api.NODE_CPU_USAGE)
    be_milli = _shared.last_value(ctx, api.NODE_BE, _shared.be_cpu_labels("usage"))
    if node is None or be_milli is None:
        return None
    return node * 1000 - be_milli


def fast_path_matters(usage: Usage, threshold_percent: int) -> bool:
    """Whether fast samples can change anything now (they were most of an idle agent's cost).
    The fast path only shrinks BE, so BE must be using CPU (at least :data:`ARM_BE_FRACTION` of the node),
    and the node must be within reach of the threshold (a rise of :data:`ARM_REACH_FRACTION` of the node
    would cross it). The periodic tick re-decides every second, so a node that heads there arms the
    sampler within a tick."""
    cap = usage.capacity_milli
    busy_be = usage.be_pods_milli >= ARM_BE_FRACTION * cap
    return busy_be and usage.node_used_milli >= cap * (threshold_percent / 100.0 - ARM_REACH_FRACTION)


def capacity_quota(capacity_milli: int) -> int:
    """The node's CPU as a CFS quota: cores * 100000 us."""
    return capacity_milli * _shared.CFS_PERIOD_US // 1000


def quota_target(budget_milli: float, current: int, capacity_milli: int) -> int | None:
    """The BE tier quota for ``budget_milli``, or ``None`` when the change is inside the 1 % band.

    ``max(budget * 100, 2000)`` us capped at capacity; from a limited quota growth is at most one step.
    """
    cap = capacity_quota(capacity_milli)
    # Rounded, not truncated: usage arrives as float cores, and 749.9999 m is meant as 750 m.
    new = min(max(round(budget_milli * _shared.CFS_PERIOD_US / 1000), _shared.MIN_BE_QUOTA_US), cap)
    new = max(new, _shared.MIN_BE_QUOTA_US)
    if current == _shared.UNLIMITED:
        return new
    if new == current or (abs(new - current) < cap * HYSTERESIS_FRACTION and new != _shared.MIN_BE_QUOTA_US):
        return None
    step = int(cap * STEP_FRACTION)
    return min(current + step, cap) if new - current > step else new


@dataclass(slots=True)
class DemandProbe:
    """Occasional squeeze of a quota-bound BE tier, to reveal LS demand hidden by contention."""

    hold: float = 3.0
    min_interval: float = 10.0
    cost_fraction: float = 0.03
    """BE quota-time a probe may take on average (the budget is 5 %; the rest is margin for a hold that
    ends a reconcile tick late)."""
    max_squeeze: float = 0.5
    """A probe takes at most this share of BE's own quota."""
    busy_fraction: float = 0.9
    """BE counts as quota-bound when it uses at least this share of its quota."""
    end_slack: float = 0.25
    """Seconds: a hold ends at the first reconcile tick this close to its planned end. Ticks come a few ms
    late on their grid, so without slack half the 3 s holds ran to a fourth tick (BE paid 4-5 %)."""
    next_at: float = -math.inf
    """When the next probe may start; ``-inf`` until BE is first seen quota-bound."""
    until: float = -math.inf
    ceiling: int = 0
    started: float | None = None
    squeezed: float = 0.0
    """Share of BE's quota the running probe takes."""

    def limit(
        self, now: float, current: int, be_used_milli: float, ls_used_milli: float, capacity_milli: int
    ) -> int | None:
        """The quota ceiling the probe imposes now, or ``None``."""
        if now < self.until - self.end_slack:
            return self.ceiling
        if self.started is not None:
            # The probe ends now: space the next one by the time it really held (a stalled tick can
            # stretch a hold), so BE's cost stays at ``cost_fraction`` on average.
            held = now - self.started
            self.next_at = max(self.next_at, self.started + self.squeezed * held / self.cost_fraction)
            self.started = None
        if current == _shared.UNLIMITED or ls_used_milli <= 0:
            return None
        if be_used_milli < self.busy_fraction * current * 1000 / _shared.CFS_PERIOD_US:
            return None
        cap = capacity_quota(capacity_milli)
        ceiling = max(
            current - min(int(cap * STEP_FRACTION), int(current * self.max_squeeze)), _shared.MIN_BE_QUOTA_US
        )
        if current - ceiling < cap * HYSTERESIS_FRACTION:
            # Inside the 1 % band growth back would be skipped and BE kept squeezed; a squeeze this small
            # could only reveal LS demand below what the band ignores anyway.
            return None
        spacing = max(self.min_interval, (current - ceiling) / current * self.hold / self.cost_fraction)
        if self.next_at == -math.inf:
            # First sight (also after a restart): BE has not paid for a probe yet, wait a full spacing.
            self.next_at = now + spacing
            return None
        if now < self.next_at:
            return None
        self.ceiling = ceiling
        self.until, self.next_at = now + self.hold, now + spacing
        self.started, self.squeezed = now, (current - ceiling) / current
        return ceiling

    def reset(self) -> None:
        self.next_at = self.until = -math.inf
        self.started = None
