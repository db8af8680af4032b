"""Plugin host: discovery and validation, gating, setup/run/shutdown order, failure isolation."""

from __future__ import annotations

import importlib.metadata
import logging
import threading
import time
from typing import Any, ClassVar

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.featuregates import KOORDLET_GATES, FeatureGate
from koordlet.metrics import AgentMetrics, PluginMetrics
from koordlet.qosmanager import loader
from koordlet.qosmanager.manager import QOSManager, Services
from koordlet.testing import wait_until
from koordshared.runtime.errors import PluginError
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.lifecycle import Supervisor
from tests.unit.koordlet.qosmanager import plugins_sample as ps


def ep(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=loader.ENTRY_POINT_GROUP)


def discover(
    builtins: list[Any], eps: list[importlib.metadata.EntryPoint] | None = None
) -> list[loader.PluginEntry]:
    return loader.discover(builtins, entry_points=lambda: eps or [], registered={})


def test_discovery_orders_builtins_then_extensions() -> None:
    entries = discover([ps.Good], [ep("Second", "tests.unit.koordlet.qosmanager.plugins_sample:Second")])
    assert [(e.name, e.builtin) for e in entries] == [("Good", True), ("Second", False)]
    assert entries[1].source.startswith("entrypoint:")


@pytest.mark.parametrize(
    ("builtins", "eps", "needle"),
    [
        ([ps.NoShutdown], [], "missing method(s) shutdown"),
        ([ps.Good, ps.Good], [], "duplicate"),
        ([], [ep("Other", "tests.unit.koordlet.qosmanager.plugins_sample:Good")], "declares name 'Good'"),
        ([], [ep("Broken", "no_such_module_xyz:Plugin")], "failed to load"),
    ],
)
def test_invalid_plugins_fail_with_their_name(builtins: list[Any], eps: list[Any], needle: str) -> None:
    with pytest.raises(PluginError) as err:
        discover(builtins, eps)
    assert needle in str(err.value)


def test_in_process_registration_rejects_duplicates(plugin_registry: None) -> None:
    plugin = ps.Second()
    api.register_qos_ext_plugin("Second", ps.Second.feature, plugin)
    with pytest.raises(PluginError, match="already registered"):
        api.register_qos_ext_plugin("Second", ps.Second.feature, plugin)
    entries = loader.discover([], entry_points=lambda: [])
    assert [(e.name, e.source) for e in entries] == [("Second", "registered")]


def test_the_plugin_registry_fixture_leaves_no_registration_behind(plugin_registry: None) -> None:
    # runs after the test above (file order): what it registered is gone
    assert api.registered_ext_plugins() == {}


def test_flags_are_collected_for_every_plugin_and_clashes_refused() -> None:
    entries = discover([ps.Good, ps.Disabled])
    assert [(e.name, [f.name for f in e.flags]) for e in entries] == [
        ("Good", ["good-interval-seconds"]),
        ("Disabled", []),
    ]

    class Clash(ps.Good):
        name = "Clash"

    with pytest.raises(PluginError, match="already declared"):
        discover([ps.Good, Clash])


class Nothing:
    """Stands in for services these plugins never touch."""


def make_manager(
    entries: list[loader.PluginEntry],
    stop: threading.Event,
    gates_text: str = "",
    degraded: Any = lambda: False,
    ext_text: str = "",
    want_fast_samples: Any = lambda _owner, _on: None,
) -> tuple[QOSManager, AgentMetrics, Supervisor]:
    gates = FeatureGate(KOORDLET_GATES)
    ext = FeatureGate({}, flag="--qos-extension-plugins")
    for e in entries:
        (gates if e.builtin else ext).add(e.name, e.spec)
    gates.set_from_string(gates_text)
    ext.set_from_string(ext_text)
    metrics = AgentMetrics(CollectorRegistry(), "n1")
    sup = Supervisor(stop)
    n: Any = Nothing()
    services = Services(
        "n1",
        n,
        n,
        n,
        n,
        n,
        time.monotonic,
        time.time,
        EventBus(),
        PluginMetrics(CollectorRegistry()),
        degraded=degraded,
        want_fast_samples=want_fast_samples,
    )
    options = {f.name: f.default for e in entries for f in e.flags}
    return QOSManager(entries, gates, ext, options, services, sup, metrics), metrics, sup


def test_disabled_plugin_is_never_set_up_and_shutdown_is_reversed() -> None:
    ps.EVENTS.clear()
    stop = threading.Event()
    entries = discover([ps.Good, ps.Disabled, ps.Second])
    manager, metrics, sup = make_manager(entries, stop)
    manager.run(stop)
    assert manager.states() == {"Good": "running", "Disabled": "disabled", "Second": "running"}
    assert "setup Disabled" not in ps.EVENTS
    manager.shutdown()
    stop.set()
    assert sup.join(time.monotonic() + 2) == []
    assert ps.EVENTS == [
        "setup Good",
        "run Good",
        "setup Second",
        "run Second",
        "shutdown Second",
        "shutdown Good",
    ]
    assert (
        metrics.registry.get_sample_value(
            "koordlet_plugin_state", {"plugin": "Disabled", "source": "builtin", "state": "disabled"}
        )
        == 1.0
    )


def test_gate_can_disable_a_default_on_plugin() -> None:
    ps.EVENTS.clear()
    stop = threading.Event()
    manager, _, _ = make_manager(discover([ps.Good, ps.Second]), stop, "Good=false")
    manager.run(stop)
    stop.set()
    manager.shutdown()
    assert "setup Good" not in ps.EVENTS and "setup Second" in ps.EVENTS


def test_raising_plugins_do_not_stop_the_others() -> None:
    stop = threading.Event()
    entries = discover([ps.RaisingRun, ps.RaisingTick, ps.Good])
    manager, metrics, sup = make_manager(entries, stop)
    manager.run(stop)
    good = next(e.plugin for e in entries if e.name == "Good")
    try:
        assert wait_until(lambda: good.ticks >= 5, 3.0)  # type: ignore[attr-defined]
        assert wait_until(
            lambda: (
                (
                    metrics.registry.get_sample_value(
                        "koordlet_tick_errors_total",
                        {"component": "plugin/RaisingTick", "kind": "RuntimeError"},
                    )
                    or 0
                )
                >= 3
            ),
            3.0,
        )
        assert manager.states()["RaisingRun"] == "failed"
        assert manager.states()["Good"] == "running"
        assert not stop.is_set()  # a plugin's failure is not an agent failure
    finally:
        stop.set()
        manager.shutdown()
        assert sup.join(time.monotonic() + 2) == []
    assert not sup.failed


def test_plugins_pause_while_the_pod_list_is_stale(caplog: pytest.LogCaptureFixture) -> None:
    # F9: with the kubelet unreachable past the staleness bound, plugins stop acting (sampling goes on).
    caplog.set_level(logging.INFO, "koordlet.qosmanager.manager")
    stop = threading.Event()
    stale = threading.Event()
    entries = discover([ps.Good])
    manager, _, sup = make_manager(entries, stop, degraded=stale.is_set)
    good = next(e.plugin for e in entries if e.name == "Good")
    manager.run(stop)
    try:
        assert wait_until(lambda: good.ticks >= 2, 3.0)  # type: ignore[attr-defined]
        stale.set()
        time.sleep(0.2)  # let a tick in flight finish
        frozen = good.ticks  # type: ignore[attr-defined]
        time.sleep(0.5)
        assert good.ticks == frozen  # type: ignore[attr-defined]
        stale.clear()
        assert wait_until(lambda: good.ticks > frozen, 3.0)  # type: ignore[attr-defined]
    finally:
        stop.set()
        manager.shutdown()
        assert sup.join(time.monotonic() + 2) == []
    paused = [r for r in caplog.records if "paused" in r.getMessage()]
    resumed = [r for r in caplog.records if "resumed" in r.getMessage()]
    assert len(paused) == 1 and len(resumed) == 1


class Serving(ps.Disabled):
    """A default-off built-in that also serves two of Koordinator's table gates (as the CPU evictor)."""

    name = "Serving"
    serves: ClassVar[tuple[str, ...]] = ("CPUEvict", "CPUAllocatableEvict")

    def setup(self, ctx: api.PluginContext) -> None:
        ps.EVENTS.append("setup Serving")


@pytest.mark.parametrize(
    ("gates_text", "set_up"), [("", False), ("CPUEvict=true", True), ("Serving=true", True)]
)
def test_a_plugin_is_set_up_when_a_gate_it_serves_is_on(gates_text: str, set_up: bool) -> None:
    ps.EVENTS.clear()
    stop = threading.Event()
    entries = discover([Serving])
    assert entries[0].gates == ("Serving", "CPUEvict", "CPUAllocatableEvict")
    manager, _, _ = make_manager(entries, stop, gates_text)
    manager.run(stop)
    stop.set()
    manager.shutdown()
    assert ("setup Serving" in ps.EVENTS) is set_up


class ServingUnknown(Serving):
    name = "ServingUnknown"
    serves = ("NoSuchGate",)


class ExtServing(Serving):
    name = "ExtServing"


def test_served_gates_must_be_koordlet_gates_and_built_in_only(plugin_registry: None) -> None:
    with pytest.raises(PluginError, match="NoSuchGate: not koordlet gates"):
        discover([ServingUnknown])
    api.register_qos_ext_plugin("ExtServing", ExtServing.feature, ExtServing())
    with pytest.raises(PluginError, match="only built-in plugins serve koordlet gates"):
        loader.discover([], entry_points=lambda: [])


class SampleListener(ps.Second):
    """An extension written before ``want_fast_samples``: it subscribes to the fast samples, nothing else."""

    name = "SampleListener"

    def run(self, stop: threading.Event) -> None:
        self.ctx.subscribe(api.EVENT_NODE_SAMPLE, lambda: None)


def test_an_extension_subscribing_to_fast_samples_keeps_them_coming() -> None:
    stop = threading.Event()
    entries = discover(
        [], [ep("SampleListener", "tests.unit.koordlet.qosmanager.test_plugin_host:SampleListener")]
    )
    wanted: list[tuple[str, bool]] = []

    def want(owner: str, on: bool) -> None:
        wanted.append((owner, on))

    manager, _, _ = make_manager(entries, stop, ext_text="SampleListener=true", want_fast_samples=want)
    manager.run(stop)
    stop.set()
    manager.shutdown()
    assert wanted == [("SampleListener", True)]
