"""The plugin contract package: its docstring example runs, options are typed, plugin metrics are shared."""

from __future__ import annotations

import textwrap
import threading

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.featuregates import FeatureGate
from koordlet.metrics import PluginMetrics
from koordlet.qosmanager.loader import discover
from koordlet.qosmanager.manager import QOSManager, Services
from koordlet.testing import make_harness
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.lifecycle import Supervisor
from tests.support.paths import ROOT


def docstring_example() -> str:
    """The minimal plugin of the package's notes (``docs/modules.md``, the ``koordlet/api`` section)."""
    doc = (ROOT / "docs" / "modules.md").read_text()
    doc = doc[doc.index("## `koordlet/api/__init__.py`") :]
    start = doc.index("::", doc.index("A minimal third-party plugin")) + 2
    return textwrap.dedent(doc[start : doc.index("and in its distribution")])


def test_the_package_docstring_example_is_a_working_plugin() -> None:
    namespace: dict[str, object] = {}
    exec(compile(docstring_example(), "koordlet.api example", "exec"), namespace)
    hello = namespace["Hello"]
    assert isinstance(hello, type)
    plugin = hello()
    assert isinstance(plugin, api.QOSPlugin)
    h = make_harness()
    h.start(plugin)
    # The example's flag default reaches the scheduler as a float, through ctx.option().
    assert [interval for interval, _ in h.scheduled] == [5.0]
    h.scheduled[0][1]()  # one tick logs and does not raise


def test_every_public_name_is_exported() -> None:
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert {"PluginContext", "QOSPlugin", "MetricRegistry", "AgentOptions", "Flag"} <= set(api.__all__)


SPEED = api.Flag("speed", int, 3, "an int flag")
RATIO = api.Flag("ratio", float, 0.5, "a float flag")


class Typed(api.QOSPluginBase):
    name = "Typed"

    def init_flags(self, flags: api.FlagSet) -> None:
        flags.add(SPEED)
        flags.add(RATIO)


def test_option_returns_the_flag_type_and_refuses_undeclared_flags() -> None:
    h = make_harness()
    plugin = h.start(Typed())
    assert isinstance(plugin, Typed)
    h.options["ratio"] = 2  # an int where a float flag is expected is still that float
    ctx = h.ctx
    assert ctx.option(SPEED) == 3 and isinstance(ctx.option(SPEED), int)
    assert ctx.option(RATIO) == 2.0 and isinstance(ctx.option(RATIO), float)
    with pytest.raises(api.PluginError, match="--other"):
        ctx.option(api.Flag("other", str, "", ""))
    h.options["speed"] = "fast"
    with pytest.raises(api.PluginError, match="--speed"):
        h.ctx.option(SPEED)


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        (api.Flag("x", int, "3", ""), "default '3' is not a int"),
        (api.Flag("x", bool, 1, ""), "default 1 is not a bool"),
        (api.Flag("x", int, True, ""), "default True is not a int"),
        (api.Flag("x", list, [], ""), "type must be"),  # type: ignore[type-var]
        (api.Flag("-x", int, 1, ""), "bad flag name"),
    ],
)
def test_flagset_refuses_flags_it_could_not_parse(flag: api.Flag[api.OptionValue], why: str) -> None:
    with pytest.raises(api.PluginError, match=why):
        api.FlagSet("P").add(flag)


def test_plugin_metrics_hand_back_the_same_gauge_and_refuse_other_labels() -> None:
    registry = CollectorRegistry()
    metrics = PluginMetrics(registry)
    first = metrics.gauge("koordlet_test_value", "a test gauge", ["node"])
    assert metrics.gauge("koordlet_test_value", "a test gauge", ["node"]) is first
    first.labels("n1").set(4)
    assert registry.get_sample_value("koordlet_test_value", {"node": "n1"}) == 4
    with pytest.raises(ValueError, match="labels"):
        metrics.gauge("koordlet_test_value", "a test gauge", ["pod"])
    with pytest.raises(ValueError):
        PluginMetrics(registry).gauge("koordlet_test_value", "another owner of the name", ["node"])


def test_the_agent_scheduler_refuses_a_non_positive_interval() -> None:
    class Ticks(api.QOSPluginBase):
        name = "Ticks"

        def run(self, stop: threading.Event) -> None:
            self.ctx.every(0.0, lambda: None)

    entries = discover([], entry_points=lambda: [], registered={"Ticks": (api.FeatureSpec(True), Ticks())})
    gates, ext = FeatureGate({}), FeatureGate({}, flag="--qos-extension-plugins")
    ext.add("Ticks", api.FeatureSpec(True))
    h = make_harness()
    services = Services(
        "n1",
        h.states,
        h.metrics,
        h.host,
        h.executor,
        h.evictor,
        h.clock,
        h.clock.wall,
        EventBus(),
        h.plugin_metrics,
    )
    stop = threading.Event()
    manager = QOSManager(entries, gates, ext, {}, services, Supervisor(stop))
    manager.run(stop)
    assert manager.states() == {"Ticks": "failed"}
