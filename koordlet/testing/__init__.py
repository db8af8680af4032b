"""The plugin-author kit: fakes of every ``koordlet.api`` service, a harness, test data, real-kernel helpers.

Unit tests of a plugin (no threads, no sleeps, no root)::

    from koordlet.testing import make_harness, make_pod, be_slo
Details: ``docs/modules.md``.
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
