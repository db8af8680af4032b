"""``ElasticQuotaArgs``: Koordinator's fields, code defaults (``SetDefaults_ElasticQuotaArgs``) and
validation (``ValidateElasticQuotaArgs``), read strictly from the profile's ``pluginConfig[].args``.

Defaults: the over-use revoke is off (``monitorAllQuotas: false``; when on, a quota used above its runtime
for ``delayEvictTime`` 120 s is brought back under it, checked every ``revokePodInterval`` 1 s); runtime
quotas on (``enableRuntimeQuota: true``: PreFilter checks against the runtime, else against max); mins
scaled when they exceed the cluster (``enableMinQuotaScale: true``); parents not checked
(``enableCheckParentQuota: false``); pods of the default quota never preempted
(``disableDefaultQuotaPreemption: true``); the built-in quotas live in ``quotaGroupNamespace``
``koordinator-system``, the default and system quotas capped at ``MaxInt64/5`` cpu and memory.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.scheduler.framework import InvalidArgs
from koordshared.apis.core.resources import value_of
from koordshared.apis.meta.quantity import parse_quantity
from koordshared.apis.meta.strictargs import decode
from koordshared.runtime.errors import InvalidValue

MAX_INT64_BY_5 = (2**63 - 1) // 5
"""Koordinator's default cap of the default and system quotas (``math.MaxInt64/5``, cpu in cores)."""
DEFAULT_GROUP_MAX = {"cpu": MAX_INT64_BY_5 * 1000, "memory": MAX_INT64_BY_5}
"""In the scheduler's units (cpu in millicores)."""
DEFAULT_NAMESPACE = "koordinator-system"
DEFAULT_DELAY_EVICT = 120.0
DEFAULT_REVOKE_INTERVAL = 1.0
DEFAULT_SNAPSHOT_INTERVAL = 120.0

_FIELDS = {
    "delayEvictTime": "duration",
    "revokePodInterval": "duration",
    "defaultQuotaGroupMax": "object",
    "systemQuotaGroupMax": "object",
    "quotaGroupNamespace": "str",
    "monitorAllQuotas": "bool",
    "enableCheckParentQuota": "bool",
    "enableRuntimeQuota": "bool",
    "enableMinQuotaScale": "bool",
    "disableDefaultQuotaPreemption": "bool",
    "enableQueueHint": "bool",
    "quotaSnapshotUpdateInterval": "duration",
    "hookPlugins": "object_list",
}


@dataclass(frozen=True, slots=True)
class ElasticQuotaArgs:
    """The defaulted, validated args (see the module docstring)."""

    delay_evict_time: float = DEFAULT_DELAY_EVICT
    revoke_pod_interval: float = DEFAULT_REVOKE_INTERVAL
    default_quota_group_max: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_GROUP_MAX))
    system_quota_group_max: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_GROUP_MAX))
    quota_group_namespace: str = DEFAULT_NAMESPACE
    monitor_all_quotas: bool = False
    enable_check_parent_quota: bool = False
    enable_runtime_quota: bool = True
    enable_min_quota_scale: bool = True
    disable_default_quota_preemption: bool = True
    enable_queue_hint: bool = False
    quota_snapshot_update_interval: float = DEFAULT_SNAPSHOT_INTERVAL


def resource_list(raw: Mapping[str, Any], at: str) -> dict[str, int]:
    """A ResourceList in the scheduler's units; a value that is not a quantity, or is negative, is an
    error naming the entry."""
    out: dict[str, int] = {}
    for name, text in raw.items():
        if not isinstance(text, str | int | float) or isinstance(text, bool):
            raise InvalidArgs(f"{at}.{name}: want a quantity, got {text!r}")
        try:
            q = parse_quantity(text)
        except InvalidValue as err:
            raise InvalidArgs(f"{at}.{name}: {err}") from err
        if q < 0:
            raise InvalidArgs(f"{at}.{name}: should be a positive value, got {text!r}")
        out[str(name)] = value_of(str(name), q)
    return out


def parse_args(raw: Mapping[str, Any] | None) -> ElasticQuotaArgs:
    """Decode, default and validate; :class:`InvalidArgs` names the first field in error."""
    v = decode(raw, _FIELDS)
    if v.get("hookPlugins"):
        raise InvalidArgs(
            "hookPlugins: no quota hook plugins are built into koord-scheduler "
            "(Koordinator's are compiled into its binary); leave it empty"
        )
    maxes = {
        key: resource_list(v[key], key) if v.get(key) else dict(DEFAULT_GROUP_MAX)
        for key in ("defaultQuotaGroupMax", "systemQuotaGroupMax")
    }
    args = ElasticQuotaArgs(
        delay_evict_time=v.get("delayEvictTime", DEFAULT_DELAY_EVICT),
        revoke_pod_interval=v.get("revokePodInterval", DEFAULT_REVOKE_INTERVAL),
        default_quota_group_max=maxes["defaultQuotaGroupMax"],
        system_quota_group_max=maxes["systemQuotaGroupMax"],
        quota_group_namespace=v.get("quotaGroupNamespace") or DEFAULT_NAMESPACE,
        monitor_all_quotas=v.get("monitorAllQuotas", False),
        enable_check_parent_quota=v.get("enableCheckParentQuota", False),
        enable_runtime_quota=v.get("enableRuntimeQuota", True),
        enable_min_quota_scale=v.get("enableMinQuotaScale", True),
        disable_default_quota_preemption=v.get("disableDefaultQuotaPreemption", True),
        enable_queue_hint=v.get("enableQueueHint", False),
        quota_snapshot_update_interval=v.get("quotaSnapshotUpdateInterval", DEFAULT_SNAPSHOT_INTERVAL),
    )
    validate(args)
    return args


def validate(args: ElasticQuotaArgs) -> None:
    if args.delay_evict_time < 0:
        raise InvalidArgs(f"delayEvictTime: should be a positive value, got {args.delay_evict_time}s")
    for name, seconds in (
        ("revokePodInterval", args.revoke_pod_interval),
        ("quotaSnapshotUpdateInterval", args.quota_snapshot_update_interval),
    ):
        if seconds <= 0:
            raise InvalidArgs(f"{name}: should be a positive duration (a periodic check), got {seconds}s")
