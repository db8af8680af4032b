"""ElasticQuotaArgs: Koordinator's code defaults, its shipped profile's args accepted, and every refusal
naming its field."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.plugins.elasticquota.args import MAX_INT64_BY_5, ElasticQuotaArgs, parse_args
from koordshared.runtime.errors import InvalidArgs


def test_defaults_are_koordinators() -> None:
    args = parse_args(None)
    assert args == ElasticQuotaArgs()
    assert args.delay_evict_time == 120.0 and args.revoke_pod_interval == 1.0
    assert args.quota_group_namespace == "koordinator-system"
    assert (args.monitor_all_quotas, args.enable_check_parent_quota) == (False, False)
    assert (args.enable_runtime_quota, args.enable_min_quota_scale) == (True, True)
    assert (args.disable_default_quota_preemption, args.enable_queue_hint) == (True, False)
    assert args.quota_snapshot_update_interval == 120.0
    # math.MaxInt64/5 of cpu (cores: the scheduler counts millicores) and of memory (bytes).
    assert args.default_quota_group_max == {"cpu": MAX_INT64_BY_5 * 1000, "memory": MAX_INT64_BY_5}
    assert args.system_quota_group_max == args.default_quota_group_max


def test_koordinators_shipped_args_and_every_field() -> None:
    # config/manager/scheduler-config.yaml passes the namespace only (apiVersion/kind are removed upstream).
    assert parse_args({"quotaGroupNamespace": "koordinator-system"}) == ElasticQuotaArgs()
    args = parse_args(
        {
            "delayEvictTime": "30s",
            "revokePodInterval": "500ms",
            "defaultQuotaGroupMax": {"cpu": "8", "memory": "16Gi"},
            "systemQuotaGroupMax": {"cpu": "500m"},
            "quotaGroupNamespace": "quotas",
            "monitorAllQuotas": True,
            "enableCheckParentQuota": True,
            "enableRuntimeQuota": False,
            "enableMinQuotaScale": False,
            "disableDefaultQuotaPreemption": False,
            "enableQueueHint": True,
            "quotaSnapshotUpdateInterval": "1m",
            "hookPlugins": [],
        }
    )
    assert args.delay_evict_time == 30 and args.revoke_pod_interval == 0.5
    assert args.default_quota_group_max == {"cpu": 8000, "memory": 16 * 2**30}
    assert args.system_quota_group_max == {"cpu": 500}
    assert args.quota_group_namespace == "quotas" and args.quota_snapshot_update_interval == 60
    assert args.monitor_all_quotas and args.enable_check_parent_quota and args.enable_queue_hint
    assert not (
        args.enable_runtime_quota or args.enable_min_quota_scale or args.disable_default_quota_preemption
    )


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"delayEvictTime": 120}, "delayEvictTime"),  # a Go duration is a string
        ({"delayEvictTime": "-1s"}, "delayEvictTime"),
        ({"revokePodInterval": "0s"}, "revokePodInterval"),
        ({"quotaSnapshotUpdateInterval": "0s"}, "quotaSnapshotUpdateInterval"),
        ({"defaultQuotaGroupMax": {"cpu": "-1"}}, "defaultQuotaGroupMax.cpu"),
        ({"systemQuotaGroupMax": {"memory": "lots"}}, "systemQuotaGroupMax.memory"),
        ({"systemQuotaGroupMax": {"memory": True}}, "systemQuotaGroupMax.memory"),
        ({"defaultQuotaGroupMax": ["cpu"]}, "defaultQuotaGroupMax"),
        ({"monitorAllQuotas": "true"}, "monitorAllQuotas"),
        ({"quotaGroupNamespace": 7}, "quotaGroupNamespace"),
        ({"hookPlugins": [{"key": "k", "factoryKey": "f"}]}, "hookPlugins"),
        ({"enableRuntimeQuota": True, "enableRuntimeQuotas": True}, "enableRuntimeQuotas"),
    ],
)
def test_bad_args_are_refused_naming_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgs) as err:
        parse_args(raw)
    assert field in str(err.value)
