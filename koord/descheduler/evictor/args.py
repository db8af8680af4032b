"""``MigrationControllerArgs`` (``descheduler/v1alpha2``) for our Evict/Filter plugin, read strictly.

Kept with Koordinator's meaning and defaults: the filter options, the limits (``maxMigratingPerNode`` 2,
per namespace, global, per workload, ``objectLimiters.workload`` with its 5-minute window),
``skipEvictionGates``, ``evictQPS`` 10 and ``evictBurst`` 1, the PodMigrationJobs (``defaultJobMode``
ReservationFirst, ``defaultJobTTL`` 5 minutes, ``schedulerNames`` koord-scheduler, ``arbitrationArgs``
every 500 ms), ``defaultDeleteOptions.gracePeriodSeconds`` and ``dryRun``; and one field of ours,
``usePodMigrationJobs`` (default true; false evicts at once). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.selector import LabelSelector, parse_selector
from koordshared.apis.meta.strictargs import decode
from koordshared.runtime.errors import InvalidArgs

log = logging.getLogger(__name__)

GATES = (
    "MaxUnavailablePerWorkload",
    "MaxMigratingPerWorkload",
    "MaxMigratingPerNode",
    "MaxMigratingPerNamespace",
    "MaxMigratingGlobally",
    "ExpectedReplicas",
    "PVC",
    "BarePods",
    "LocalStorage",
    "SystemCritical",
    "PriorityThreshold",
    "LabelSelector",
    "Namespaces",
    "NodeFit",
)
JOB_MODES = ("ReservationFirst", "EvictDirectly")
_PERCENT = re.compile(r"^([0-9]+)%\Z")


@dataclass(frozen=True, slots=True)
class IntOrPercent:
    """``intstr.IntOrString``: an absolute number or a percentage of a workload's replicas."""

    value: int
    percent: bool = False

    def scaled(self, total: int) -> int:
        """``GetScaledValueFromIntOrPercent`` rounding down."""
        return math.floor(self.value * total / 100) if self.percent else self.value


@dataclass(frozen=True, slots=True)
class MigrationControllerArgs:
    dry_run: bool = False
    evict_failed_bare_pods: bool = False
    evict_all_bare_pods: bool = False
    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold_value: int | None = None
    priority_threshold_name: str = ""
    label_selector: LabelSelector | None = None
    include_namespaces: frozenset[str] = frozenset()
    exclude_namespaces: frozenset[str] = frozenset()
    node_fit: bool = False
    skip_gates: frozenset[str] = frozenset()
    max_migrating_globally: int | None = None
    max_migrating_per_node: int | None = 2
    max_migrating_per_namespace: int | None = None
    max_migrating_per_workload: IntOrPercent | None = None
    max_unavailable_per_workload: IntOrPercent | None = None
    skip_check_expected_replicas: bool = False
    workload_window: float = 300.0
    """``objectLimiters.workload.duration`` (0: no workload window)."""
    workload_window_max: IntOrPercent | None = None
    workload_window_burst: int = 1
    job_ttl: float = 300.0
    """``defaultJobTTL``: a job's time limit; without jobs, how long an evicted pod counts as migrating."""
    use_jobs: bool = True
    """Moves go through PodMigrationJobs (Koordinator's way); false: straight to the Eviction API."""
    job_mode: str = "ReservationFirst"
    scheduler_names: frozenset[str] = frozenset({"koord-scheduler"})
    arbitration_interval: float = 0.5
    """How often the queue of pending jobs is arbitrated (``arbitrationArgs.enabled`` is read and, as in
    Koordinator, has no effect)."""
    evict_qps: float = 10.0
    evict_burst: int = 1
    grace_period_seconds: int | None = None

    def gated(self, gate: str) -> bool:
        """Whether ``gate`` is checked (not listed in ``skipEvictionGates``)."""
        return gate not in self.skip_gates


_FIELDS = {
    "dryRun": "bool",
    "maxConcurrentReconciles": "int",
    "evictFailedBarePods": "bool",
    "evictAllBarePods": "bool",
    "evictLocalStoragePods": "bool",
    "evictSystemCriticalPods": "bool",
    "ignorePvcPods": "bool",
    "priorityThreshold": "object",
    "labelSelector": "object",
    "namespaces": "object",
    "nodeFit": "bool",
    "nodeSelector": "str",
    "skipEvictionGates": "str_list",
    "maxMigratingGlobally": "int",
    "maxMigratingPerNode": "int",
    "maxMigratingPerNamespace": "int",
    "maxMigratingPerWorkload": "any",
    "maxUnavailablePerWorkload": "any",
    "skipCheckExpectedReplicas": "bool",
    "objectLimiters": "object",
    "defaultJobMode": "str",
    "defaultJobTTL": "duration",
    "schedulerNames": "str_list",
    "evictQPS": "any",
    "evictBurst": "int",
    "evictionPolicy": "str",
    "defaultDeleteOptions": "object",
    "arbitrationArgs": "object",
    "usePodMigrationJobs": "bool",
}


def int_or_percent(raw: Any, at: str) -> IntOrPercent:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return IntOrPercent(raw)
    if isinstance(raw, str):
        m = _PERCENT.match(raw.strip())
        if m:
            return IntOrPercent(int(m.group(1)), percent=True)
        if raw.strip().isdecimal():
            return IntOrPercent(int(raw.strip()))
    raise InvalidArgs(f'{at}: want a non-negative integer or a percentage such as "10%", got {raw!r}')


def _qps(raw: Any) -> float:
    """``Float64OrString``: a number or a numeric string (Koordinator's config writes ``"10"``)."""
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise InvalidArgs(f"evictQPS: must be a number greater than 0, got {raw!r}")
    return value


def parse_args(raw: Mapping[str, Any] | None) -> MigrationControllerArgs:
    """Decode, default and validate; :class:`InvalidArgs` names the first field in error."""
    v = decode(raw, _FIELDS)
    policy = v.get("evictionPolicy") or "Eviction"
    if policy != "Eviction":
        raise InvalidArgs(
            f"evictionPolicy: {policy!r} is not supported; this evictor only uses the Eviction API, which "
            "honours PodDisruptionBudgets (set evictionPolicy: Eviction)"
        )
    mode = v.get("defaultJobMode") or JOB_MODES[0]
    if mode not in JOB_MODES:
        raise InvalidArgs(f"defaultJobMode: want one of {', '.join(JOB_MODES)}, got {mode!r}")
    use_jobs = v.get("usePodMigrationJobs", True)
    if not use_jobs and "defaultJobMode" in v:
        log.info("MigrationController: usePodMigrationJobs is false: defaultJobMode %s has no effect", mode)
    arbitration = decode(
        v.get("arbitrationArgs"), {"enabled": "bool", "interval": "duration"}, "arbitrationArgs."
    )
    interval = arbitration.get("interval", 0.5)
    if interval <= 0:
        raise InvalidArgs("arbitrationArgs.interval: must be greater than 0")
    if v.get("nodeSelector"):
        raise InvalidArgs(
            "nodeSelector: not supported by this evictor; select nodes with the profile's or the "
            "DeschedulerConfiguration's nodeSelector"
        )
    if v.get("maxConcurrentReconciles", 1) < 1:
        raise InvalidArgs("maxConcurrentReconciles: must be 1 or more")
    gates = frozenset(v.get("skipEvictionGates", ()))
    bad = sorted(gates - set(GATES))
    if bad:
        raise InvalidArgs(f"skipEvictionGates: unknown gate(s) {', '.join(bad)}; known: {', '.join(GATES)}")
    for key in ("maxMigratingGlobally", "maxMigratingPerNode", "maxMigratingPerNamespace"):
        if v.get(key, 0) < 0:
            raise InvalidArgs(f"{key}: must be 0 or more, got {v[key]}")
    ns = decode(v.get("namespaces"), {"include": "str_list", "exclude": "str_list"}, "namespaces.")
    include, exclude = frozenset(ns.get("include", ())), frozenset(ns.get("exclude", ()))
    if include and exclude:
        raise InvalidArgs("namespaces: only one of include and exclude may be set")
    prio = decode(v.get("priorityThreshold"), {"value": "int", "name": "str"}, "priorityThreshold.")
    if "value" in prio and prio.get("name"):
        raise InvalidArgs("priorityThreshold: set value or name, not both")
    selector = None
    if v.get("labelSelector") is not None:
        selector = parse_selector(v["labelSelector"])
        if selector.error:
            raise InvalidArgs(f"labelSelector: {selector.error}")
    limiters = decode(v.get("objectLimiters"), {"workload": "object"}, "objectLimiters.")
    window, window_max, burst = 300.0, None, 1
    if "objectLimiters" in v:  # given: only what it says (Koordinator defaults an empty map only)
        window = 0.0
        if "workload" in limiters:
            w = decode(
                limiters["workload"],
                {"duration": "duration", "maxMigrating": "any", "burst": "int"},
                "objectLimiters.workload.",
            )
            window = w.get("duration", 0.0)
            if "maxMigrating" in w:
                window_max = int_or_percent(w["maxMigrating"], "objectLimiters.workload.maxMigrating")
            burst = w.get("burst", 0) or 1
    delete = decode(v.get("defaultDeleteOptions"), {"gracePeriodSeconds": "int"}, "defaultDeleteOptions.")
    ttl = v.get("defaultJobTTL", 300.0)
    if ttl < 0:
        raise InvalidArgs("defaultJobTTL: must not be negative")
    evict_burst = v.get("evictBurst", 1)
    if evict_burst <= 0:
        raise InvalidArgs(f"evictBurst: must be greater than 0, got {evict_burst}")
    return MigrationControllerArgs(
        dry_run=v.get("dryRun", False),
        evict_failed_bare_pods=v.get("evictFailedBarePods", False),
        evict_all_bare_pods=v.get("evictAllBarePods", False),
        evict_local_storage_pods=v.get("evictLocalStoragePods", False),
        evict_system_critical_pods=v.get("evictSystemCriticalPods", False),
        ignore_pvc_pods=v.get("ignorePvcPods", False),
        priority_threshold_value=prio.get("value"),
        priority_threshold_name=prio.get("name", ""),
        label_selector=selector,
        include_namespaces=include,
        exclude_namespaces=exclude,
        node_fit=v.get("nodeFit", False),
        skip_gates=gates,
        max_migrating_globally=v.get("maxMigratingGlobally") or None,
        max_migrating_per_node=v.get("maxMigratingPerNode", 2) or None,
        max_migrating_per_namespace=v.get("maxMigratingPerNamespace") or None,
        max_migrating_per_workload=(
            int_or_percent(v["maxMigratingPerWorkload"], "maxMigratingPerWorkload")
            if "maxMigratingPerWorkload" in v
            else None
        ),
        max_unavailable_per_workload=(
            int_or_percent(v["maxUnavailablePerWorkload"], "maxUnavailablePerWorkload")
            if "maxUnavailablePerWorkload" in v
            else None
        ),
        skip_check_expected_replicas=v.get("skipCheckExpectedReplicas", False),
        workload_window=window,
        workload_window_max=window_max,
        workload_window_burst=burst,
        job_ttl=ttl,
        evict_qps=_qps(v.get("evictQPS", 10)),
        evict_burst=evict_burst,
        grace_period_seconds=delete.get("gracePeriodSeconds"),
        use_jobs=use_jobs,
        job_mode=mode,
        scheduler_names=frozenset(v.get("schedulerNames") or ("koord-scheduler",)),
        arbitration_interval=interval,
    )


def max_per_workload(replicas: int, given: IntOrPercent | None) -> int:
    """Koordinator's ``GetMaxMigrating``/``GetMaxUnavailable``: the given value scaled by the replicas
    (a percentage that rounds to 0 counts 1), else 10 % above 10 replicas, 2 from 4 to 10, else 1;
    never more than the replicas."""
    value = 0
    if given is not None:
        value = given.scaled(replicas) or 1
    if value == 0:
        value = IntOrPercent(10, True).scaled(replicas) if replicas > 10 else 2 if replicas >= 4 else 1
    return min(value, replicas)
