"""The descheduler framework: profile merging, plugin building and its errors, the evictor proxy, and the
round (Ready nodes through the selectors, nothing with one node, every Deschedule before any Balance)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koord.descheduler.app import Descheduler, check_profiles, plugin_registry
from koord.descheduler.config import Configuration, DeschedulerConfig, parse_configuration
from koord.descheduler.framework import (
    DEPRECATED_ENTRY_POINT_GROUPS,
    ENTRY_POINT_GROUP,
    EvictOptions,
    Obj,
    Status,
)
from koord.descheduler.framework.profile import parse_profiles
from koord.descheduler.framework.runtime import Environment, Framework
from koord.descheduler.informers import MemoryInformers
from koord.descheduler.testing import NoEvents
from koordshared.kube.process import Address
from koordshared.runtime.errors import ConfigError, PluginError
from koordshared.runtime.pluginregistry import group_entry_points
from koordshared.testing import objects


def test_default_profile_enables_migration_controller_at_evict_and_filter() -> None:
    (p,) = parse_profiles(None, "profiles")
    assert p.name == "koord-descheduler"
    assert p.enabled("evict") == p.enabled("filter") == ("MigrationController",)
    assert p.enabled("balance") == p.enabled("deschedule") == ()


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"profiles": [{"plugins": {"rebalance": {}}}]}, "unknown extension point(s) rebalance"),
        ({"profiles": [{"name": "a"}, {"name": "a"}]}, "duplicate profile name 'a'"),
        ({"profiles": [{}, {"name": "b"}]}, "profiles[0].name: required"),
        ({"profiles": [{"pluginConfig": [{"name": "X"}, {"name": "X"}]}]}, "duplicate pluginConfig for X"),
        ({"profiles": [{"plugins": {"balance": {"enabled": [{"nam": "X"}]}}}]}, "balance.enabled[0]"),
        ({"nodeSelector": "role=worker"}, "want a label selector object"),
        ({"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}, "unknown operator"),
        ({"deschedulingInterval": "soon"}, "deschedulingInterval"),
        ({"maxNoOfPodsToEvictPerNode": -1}, "maxNoOfPodsToEvictPerNode"),
        ({"apiVersion": "descheduler/v1alpha1"}, "want descheduler/v1alpha2"),
        ({"leaderElection": {"resourceLock": "endpoints"}}, "only leases"),
        ({"profile": []}, "unknown field(s) profile"),
        ({"metricsBindAddress": ":1", "healthzBindAddress": ":2"}, "differ"),
    ],
)
def test_configuration_errors_name_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_configuration({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration", **doc})
    assert message in str(err.value)


def test_koordinators_shipped_configuration_parses() -> None:
    conf = parse_configuration(
        {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerConfiguration",
            "enableContentionProfiling": True,
            "enableProfiling": True,
            "healthzBindAddress": "0.0.0.0:10251",
            "metricsBindAddress": "0.0.0.0:10251",
            "leaderElection": {
                "resourceLock": "leases",
                "resourceName": "koord-descheduler",
                "resourceNamespace": "koordinator-system",
            },
            "deschedulingInterval": "10s",
            "dryRun": False,
            "profiles": [
                {
                    "name": "koord-descheduler",
                    "plugins": {
                        "deschedule": {"disabled": [{"name": "*"}]},
                        "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "MigrationController"}]},
                    },
                    "pluginConfig": [
                        {
                            "name": "MigrationController",
                            "args": {
                                "apiVersion": "descheduler/v1alpha2",
                                "kind": "MigrationControllerArgs",
                                "evictionPolicy": "Eviction",
                                "namespaces": {"exclude": ["kube-system", "koordinator-system"]},
                                "evictQPS": "10",
                                "evictBurst": 1,
                            },
                        },
                        {
                            "name": "LowNodeLoad",
                            "args": {
                                "apiVersion": "descheduler/v1alpha2",
                                "kind": "LowNodeLoadArgs",
                                "evictableNamespaces": {"exclude": ["kube-system", "koordinator-system"]},
                                "useDeviationThresholds": False,
                                "lowThresholds": {"cpu": 45, "memory": 55},
                                "highThresholds": {"cpu": 75, "memory": 80},
                            },
                        },
                    ],
                }
            ],
        }
    )
    assert conf.interval == 10.0 and conf.bind_address == "0.0.0.0:10251"
    (fw,) = check_profiles(conf, plugin_registry(entry_points=lambda: []))
    # LowNodeLoad has args but no point enables it, as in Koordinator's shipped file: not built
    assert set(fw.plugins) == {"MigrationController"}


def profile_doc(**plugins: Any) -> dict[str, Any]:
    return {"profiles": [{"name": "p", "plugins": plugins, "pluginConfig": plugins.pop("_config", [])}]}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            profile_doc(balance={"enabled": [{"name": "LowNodLoad"}]}),
            # The list names every registered plugin (a new built-in joins it without a test edit).
            "plugin 'LowNodLoad': profile 'p': not registered; registered plugins: ",
        ),
        (
            profile_doc(
                _config=[
                    {
                        "name": "LowNodeLoad",
                        "args": {"lowThresholds": {"cpu": 90}, "highThresholds": {"cpu": 80}},
                    }
                ],
                balance={"enabled": [{"name": "LowNodeLoad"}]},
            ),
            "plugin 'LowNodeLoad': profile 'p': invalid args: "
            "lowThresholds.cpu: 90 is above highThresholds.cpu (80)",
        ),
        (
            profile_doc(
                _config=[
                    {
                        "name": "LowNodeLoad",
                        "args": {"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}},
                    }
                ],
                balance={"enabled": [{"name": "LowNodeLoad"}]},
            ),
            "only one of include and exclude",
        ),
        (
            profile_doc(_config=[{"name": "Nope", "args": {}}]),
            "plugin 'Nope': profile 'p': pluginConfig for an unknown plugin",
        ),
        (
            profile_doc(deschedule={"enabled": [{"name": "LowNodeLoad"}]}),
            "plugin 'LowNodeLoad': profile 'p': enabled at deschedule but has no deschedule()",
        ),
        (
            profile_doc(evict={"disabled": [{"name": "*"}]}),
            "exactly one evict plugin must be enabled, found none",
        ),
        (
            profile_doc(balance={"enabled": [{"name": "LowNodeLoad"}, {"name": "LowNodeLoad"}]}),
            "enabled twice",
        ),
        (
            profile_doc(_config=[{"name": "MigrationController", "args": {"evictionPolicy": "Delete"}}]),
            "evictionPolicy: 'Delete' is not supported",
        ),
    ],
)
def test_start_up_errors_name_the_profile_plugin_and_field(doc: dict[str, Any], message: str) -> None:
    # A bad plugin or bad args is a PluginError (as in the scheduler), a bad profile a ConfigError: both
    # stop the process at start with the message.
    conf = parse_configuration(doc)
    with pytest.raises((ConfigError, PluginError)) as err:
        check_profiles(conf, plugin_registry(entry_points=lambda: []))
    assert message in str(err.value)
    assert "profile 'p'" in str(err.value)


class Tracer:
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name = name
        self.calls = calls

    def deschedule(self, nodes: Sequence[Obj]) -> Status | None:
        self.calls.append(f"{self.name}.deschedule({len(nodes)})")
        return None

    def balance(self, nodes: Sequence[Obj]) -> Status | None:
        self.calls.append(f"{self.name}.balance({len(nodes)})")
        return Status("broken") if self.name == "B2" else None


def test_every_deschedule_runs_before_any_balance_and_a_failing_plugin_fails_alone() -> None:
    calls: list[str] = []
    registry = plugin_registry(entry_points=lambda: [])
    for name in ("D1", "B1", "D2", "B2"):
        registry.register(name, lambda _a, _h, name=name: Tracer(name, calls))
    conf = parse_configuration(
        {
            "profiles": [
                {
                    "name": "one",
                    "plugins": {
                        "deschedule": {"enabled": [{"name": "D1"}]},
                        "balance": {"enabled": [{"name": "B1"}]},
                    },
                },
                {
                    "name": "two",
                    "nodeSelector": {"matchLabels": {"pool": "b"}},
                    "plugins": {
                        "deschedule": {"enabled": [{"name": "D2"}]},
                        "balance": {"enabled": [{"name": "B2"}]},
                    },
                },
            ]
        }
    )
    informers = MemoryInformers(
        nodes=[
            objects.node("a1", labels={"pool": "a"}),
            objects.node("b1", labels={"pool": "b"}),
            objects.node("b2", labels={"pool": "b"}),
            {**objects.node("down"), "status": {"conditions": [{"type": "Ready", "status": "False"}]}},
        ]
    )
    app = descheduler(conf, informers, registry)
    assert app.run_round() == "errors"
    assert calls == ["D1.deschedule(3)", "D2.deschedule(2)", "B1.balance(3)", "B2.balance(2)"]
    calls.clear()
    informers.nodes.remove("b1")
    informers.nodes.remove("b2")
    assert app.run_round() == "skipped" and calls == []  # one Ready node: nothing to do


class NoClient:
    """Stands in for the API client: these rounds never reach the API server."""

    def close(self) -> None:
        pass


def descheduler(conf: Configuration, informers: MemoryInformers, registry: Any) -> Descheduler:
    cfg = DeschedulerConfig(addr=Address("127.0.0.1", 0), configuration=conf, leader_election=False)
    return Descheduler(cfg, CollectorRegistry(), api_client=NoClient(), informers=informers, plugins=registry)


def test_the_global_node_selector_applies_before_the_profiles() -> None:
    calls: list[str] = []
    registry = plugin_registry(entry_points=lambda: [])
    registry.register("B1", lambda _a, _h: Tracer("B1", calls))
    conf = parse_configuration(
        {
            "nodeSelector": {"matchLabels": {"team": "x"}},
            "profiles": [{"plugins": {"balance": {"enabled": [{"name": "B1"}]}}}],
        }
    )
    nodes = [objects.node(f"n{i}", labels={"team": "x" if i < 3 else "y"}) for i in range(5)]
    app = descheduler(conf, MemoryInformers(nodes=nodes), registry)
    app.run_round()
    assert calls == ["B1.balance(3)"]


def test_the_evictor_proxy_turns_the_configuration_dry_run_into_options_and_refuses_when_not_leading() -> (
    None
):
    seen: list[EvictOptions] = []

    class Evict:
        name = "E"

        def evict(self, pod: Obj, options: EvictOptions) -> bool:
            seen.append(options)
            return True

        def filter(self, pod: Obj) -> bool:
            return True

    registry = plugin_registry(entry_points=lambda: [])
    registry.register("E", lambda _a, _h: Evict())
    (profile,) = parse_profiles(
        [
            {
                "plugins": {
                    "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "E"}]},
                    "filter": {"disabled": [{"name": "*"}]},
                }
            }
        ],
        "profiles",
    )
    leading = [True]
    env = Environment(
        client=None,
        informers=MemoryInformers(),
        recorder=NoEvents(),
        dry_run=True,
        may_act=lambda: leading[0],
    )
    fw = Framework(profile, registry, env)
    pod = objects.pod("p", node_name="n")
    assert fw.evictor.evict(pod, EvictOptions(plugin="X", reason="r"))
    assert seen[-1].dry_run is True
    leading[0] = False
    assert not fw.evictor.evict(pod, EvictOptions(plugin="X", reason="r"))
    assert len(seen) == 1


def test_entry_point_plugins_join_the_registry_and_duplicates_fail() -> None:
    ep = importlib.metadata.EntryPoint(
        "Tracer", "tests.unit.koord.descheduler.framework.test_framework:Tracer", "koord.descheduler_plugins"
    )
    registry = plugin_registry(entry_points=lambda: [ep])
    entry = registry.get("Tracer")
    assert entry is not None and entry.factory is Tracer
    dup = importlib.metadata.EntryPoint(
        "LowNodeLoad",
        "tests.unit.koord.descheduler.framework.test_framework:Tracer",
        "koord.descheduler_plugins",
    )
    with pytest.raises(PluginError, match="registered twice"):
        plugin_registry(entry_points=lambda: [dup])


def test_the_groups_old_name_still_loads_with_a_deprecation_line(caplog: pytest.LogCaptureFixture) -> None:
    target = "tests.unit.koord.descheduler.framework.test_framework:Tracer"
    declared = {
        ENTRY_POINT_GROUP: [],
        "koordlet.descheduler_plugins": [
            importlib.metadata.EntryPoint("Tracer", target, "koordlet.descheduler_plugins")
        ],
    }
    found = group_entry_points(
        ENTRY_POINT_GROUP, DEPRECATED_ENTRY_POINT_GROUPS, select=lambda group: declared[group]
    )
    entry = plugin_registry(entry_points=found).get("Tracer")
    assert entry is not None and entry.factory is Tracer
    assert any("deprecated group koordlet.descheduler_plugins" in r.getMessage() for r in caplog.records)
