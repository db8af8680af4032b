"""The profile shape both plugin frameworks share (koordshared.runtime.pluginset): kube-scheduler's plugin-set
merge, duplicate refusal, pluginConfig, and one error for a bad plugin or bad args in both processes."""

from __future__ import annotations

from typing import Any

import pytest

from koord.descheduler.framework.profile import parse_profiles
from koord.scheduler.framework.profile import parse_profile
from koordshared.runtime.errors import ConfigError, PluginError
from koordshared.runtime.pluginregistry import Registry
from koordshared.runtime.pluginset import (
    PluginRef,
    PluginSet,
    build_plugin,
    merge_plugin_set,
    parse_plugin_set,
    plugin_config,
    refuse_duplicates,
)


def refs(*names: str) -> tuple[PluginRef, ...]:
    return tuple(PluginRef(n) for n in names)


def test_merge_follows_kube_scheduler() -> None:
    default = PluginSet(refs("A", "B"))
    assert merge_plugin_set(default, PluginSet()).names() == ("A", "B")
    assert merge_plugin_set(default, PluginSet(refs("C"), ("A",))).names() == ("B", "C")
    # B replaced in place, keeping its position among the defaults, with the custom weight
    merged = merge_plugin_set(default, PluginSet((PluginRef("C"), PluginRef("B", 7))))
    assert merged.enabled == (PluginRef("A"), PluginRef("B", 7), PluginRef("C"))
    assert merge_plugin_set(default, PluginSet(refs("C"), ("*",))).names() == ("C",)
    # a duplicate survives the merge (the last one replaces the default) and is refused when built
    dup = merge_plugin_set(default, PluginSet((PluginRef("B", 1), PluginRef("B", 2))))
    assert dup.enabled == (PluginRef("A"), PluginRef("B", 2), PluginRef("B", 1))
    with pytest.raises(ConfigError, match="plugin 'B' is enabled twice at filter"):
        refuse_duplicates(dup.names(), "filter", "profile x")


def test_plugin_sets_are_strict_and_weights_only_where_they_mean_something() -> None:
    assert parse_plugin_set({"enabled": [{"name": "A", "weight": 2}]}, "p", weights=True).enabled == (
        PluginRef("A", 2),
    )
    with pytest.raises(ConfigError, match=r"p.enabled\[0\]: unknown field\(s\) weight"):
        parse_plugin_set({"enabled": [{"name": "A", "weight": 2}]}, "p", weights=False)
    with pytest.raises(ConfigError, match=r"p.enabled\[0\].weight: want a non-negative integer"):
        parse_plugin_set({"enabled": [{"name": "A", "weight": -1}]}, "p", weights=True)
    with pytest.raises(ConfigError, match="p: unknown field"):
        parse_plugin_set({"enabeld": []}, "p", weights=True)
    with pytest.raises(ConfigError, match="duplicate pluginConfig for A"):
        plugin_config([{"name": "A"}, {"name": "A"}], "c")


def test_both_frameworks_merge_the_same_way() -> None:
    raw = {"enabled": [{"name": "X"}, {"name": "MigrationController"}], "disabled": [{"name": "Y"}]}
    (d,) = parse_profiles([{"plugins": {"filter": raw}}], "profiles")
    s = parse_profile({"profiles": [{"plugins": {"filter": raw}}]})
    assert d.enabled("filter") == ("MigrationController", "X")  # the default replaced in place
    assert s.point("filter").names() == ("X", "MigrationController")  # no default at filter here


class Named:
    def __init__(self, name: str) -> None:
        self.name = name


def factory(args: Any, handle: Any) -> Named:
    if args and args.get("bad"):
        raise ValueError("bad: must be false")
    return Named("P")


def test_one_error_for_a_bad_plugin_or_bad_args() -> None:
    registry = Registry()
    registry.register("P", factory)
    registry.register("Liar", factory)
    assert build_plugin(registry, "P", None, None, "profile x").name == "P"
    with pytest.raises(
        PluginError, match=r"plugin 'Q': profile x: not registered; registered plugins: P, Liar"
    ):
        build_plugin(registry, "Q", None, None, "profile x")
    with pytest.raises(PluginError, match=r"plugin 'P': profile x: invalid args: bad: must be false"):
        build_plugin(registry, "P", {"bad": True}, None, "profile x")
    with pytest.raises(PluginError, match=r"plugin 'Liar': profile x: \(builtin\) built a plugin named 'P'"):
        build_plugin(registry, "Liar", None, None, "profile x")


def test_both_frameworks_label_plugin_metrics_by_extension_point() -> None:
    from prometheus_client import CollectorRegistry

    from koord.descheduler.metrics import DeschedulerMetrics
    from koord.scheduler.extender.metrics import ExtenderMetrics

    d, s = CollectorRegistry(), CollectorRegistry()
    DeschedulerMetrics(d).plugin_call("p", "X", "balance", 0.1, failed=True)
    ExtenderMetrics(s).observe_plugin("X", "filter", 0.1)
    for registry in (d, s):
        labelled = [
            sample.labels
            for metric in registry.collect()
            for sample in metric.samples
            if "plugin" in sample.labels
        ]
        assert labelled and all("extension_point" in labels and "point" not in labels for labels in labelled)
