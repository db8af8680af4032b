"""The plugin-author kit: fakes of every ``koordlet.api`` service, a harness, test data, real-kernel helpers.

Unit tests of a plugin (no threads, no sleeps, no root)::

    from koordlet.testing import make_harness, make_pod, be_slo

    h = make_harness(slo=be_slo(cpu_suppress_threshold_percent=60))
    h.add_pod(make_pod("batch-0"))
    plugin = h.start(MyPlugin())     # flags declared, setup, run: ctx.every only records the schedule
    h.tick()                         # every scheduled function once; or call the plugin's reconcile()
    assert h.executor.updates ...    # what it asked the executor to write, in order

The fakes (:class:`FakeHostReader`, :class:`FakeExecutor`, ...) behave as the agent's services do; a
contract suite in the agent's own tests holds the fake host reader to the real one. For tests on the real
kernel, :mod:`koordlet.testing.cgroups` makes cgroups and busy processes; :mod:`koordlet.testing.agent`
runs the real agent with a plugin installed. ``koordlet.testing.pytest_plugin`` has the fixtures.
"""

from __future__ import annotations

from koordlet.testing.builders import (
    QOS_TIER,
    be_slo,
    container_id,
    make_node,
    make_pod,
    pod_uid,
    topology,
)
from koordlet.testing.clock import FakeClock
from koordlet.testing.fakes import FakeEvictor, FakeExecutor, FakeHostReader, FakeMetrics, FakeStates
from koordlet.testing.harness import Harness, make_harness
from koordlet.testing.wait import wait_until

__all__ = [
    "QOS_TIER",
    "FakeClock",
    "FakeEvictor",
    "FakeExecutor",
    "FakeHostReader",
    "FakeMetrics",
    "FakeStates",
    "Harness",
    "be_slo",
    "container_id",
    "make_harness",
    "make_node",
    "make_pod",
    "pod_uid",
    "topology",
    "wait_until",
]
