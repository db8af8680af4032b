"""The config cache's rules (Koordinator's): missing ConfigMap, empty key, bad key, unchanged data."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koord.manager.config import enabled_controllers
from koord.manager.configcache import SLOConfigCache
from koordshared.kube.objectref import ObjectRef
from koordshared.runtime.errors import ConfigError


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []
        self.refs: set[tuple[str, str]] = set()

    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.seen.append((ref.name, type_, reason))
        self.refs.add((ref.kind, ref.api_version))


def cm(**data: Any) -> dict[str, Any]:
    """The ConfigMap as a list gives it (no kind or apiVersion)."""
    text = {k.replace("_", "-"): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}
    return {
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": text,
    }


def make() -> tuple[SLOConfigCache, Events, list[str]]:
    events, calls = Events(), []
    cache = SLOConfigCache(
        recorder=events,
        on_colocation_change=lambda: calls.append("colocation"),
        on_nodeslo_change=lambda: calls.append("nodeslo"),
    )
    return cache, events, calls


def test_missing_at_first_load_is_defaults_in_error_status() -> None:
    cache, _, calls = make()
    # (the properties are read into locals: a sync changes what they read, which mypy cannot see)
    available = cache.available
    assert not available
    cache.sync(None)
    available, error = cache.available, cache.colocation_error
    assert available and error and cache.colocation.cluster.enable is False
    assert calls == ["colocation", "nodeslo"]  # first sync: everyone is enqueued once
    cache.sync(cm(colocation_config={"enable": True}))
    error = cache.colocation_error
    assert not error and cache.colocation.cluster.enable is True


def test_bad_keys_keep_the_last_good_value_and_warn_once_per_change() -> None:
    cache, events, calls = make()
    cache.sync(
        cm(
            colocation_config={"enable": True, "cpuReclaimThresholdPercent": 70},
            cpu_burst_config={"clusterStrategy": {"policy": "auto"}},
        )
    )
    calls.clear()
    good = cache.colocation
    cache.sync(cm(colocation_config="{nope", cpu_burst_config={"clusterStrategy": {"policy": "sometimes"}}))
    assert cache.colocation is good and cache.colocation_error
    assert cache.nodeslo_configs()["cpu-burst-config"].cluster["policy"] == "auto"
    assert events.seen == [
        ("slo-controller-config", "Warning", "ColocationCfgUnmarshalFailed"),
        ("slo-controller-config", "Warning", "SLOCfgUnmarshalFailed"),
    ]
    assert events.refs == {("ConfigMap", "v1")}  # named by the type the cache knows it to be
    assert calls == []  # nothing changed: no node re-enqueued
    cache.sync(cm(colocation_config="{nope", cpu_burst_config={"clusterStrategy": {"policy": "sometimes"}}))
    assert len(events.seen) == 2  # the same data again (a resync): not re-parsed


def test_empty_key_means_defaults_without_error_and_missing_nodeslo_key_its_default() -> None:
    cache, _, calls = make()
    cache.sync(
        cm(
            colocation_config={"enable": True},
            resource_threshold_config={"clusterStrategy": {"cpuSuppressThresholdPercent": 40}},
        )
    )
    calls.clear()
    cache.sync(cm(colocation_config=""))
    assert cache.colocation.cluster.enable is False and not cache.colocation_error
    assert cache.nodeslo_configs()["resource-threshold-config"].cluster["cpuSuppressThresholdPercent"] == 65
    assert calls == ["colocation", "nodeslo"]


def test_controllers_flag() -> None:
    assert enabled_controllers(["*"]) == ("nodemetric", "nodeslo", "noderesource")
    assert enabled_controllers(["*", "-noderesource"]) == ("nodemetric", "nodeslo")
    assert enabled_controllers(["nodeslo"]) == ("nodeslo",)
    with pytest.raises(ConfigError):
        enabled_controllers(["nodemetrics"])
