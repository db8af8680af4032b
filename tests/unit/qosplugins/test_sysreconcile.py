"""SystemConfig on a fake /proc and /sys through the agent's executor: values from koordlet's formula,
range refusals logged once, a field dropped from the NodeSLO restored, everything restored at stop."""

from __future__ import annotations

import logging

import pytest

from koordlet.testing import make_node
from qosplugins.sysreconcile import SystemConfig, wanted
from tests.support.fakehost import FakeHost
from tests.unit.qosplugins.nodeqos import GI, NodeQoSEnv

MIN_FREE = "proc/sys/vm/min_free_kbytes"
WSF = "proc/sys/vm/watermark_scale_factor"
REAPER = "sys/kernel/mm/memcg_reaper/reap_background"
FEATURES = "sys/kernel/debug/sched_features"


@pytest.fixture
def env(fake_host: FakeHost) -> NodeQoSEnv:
    fake_host.write(MIN_FREE, "67584\n")
    fake_host.write(WSF, "10\n")
    fake_host.write(FEATURES, "GENTLE_FAIR_SLEEPERS\n")
    return NodeQoSEnv(fake_host)


def test_written_from_the_strategy_and_restored_at_stop(env: NodeQoSEnv) -> None:
    env.slo(
        {
            "systemStrategy": {
                "minFreeKbytesFactor": 100,
                "watermarkScaleFactor": 150,
                "memcgReapBackGround": 1,
                "schedFeatures": {"GENTLE_FAIR_SLEEPERS": False},
            }
        }
    )
    plugin = env.start(SystemConfig())
    env.tick()
    # 16 GiB = 16777216 KiB; * 100 / 10000 = 167772
    assert env.fake.read(MIN_FREE).strip() == "167772"
    assert env.fake.read(WSF).strip() == "150"
    assert env.fake.read(FEATURES).strip() == "NO_GENTLE_FAIR_SLEEPERS"
    assert not env.fake.path(REAPER).exists()  # an Anolis file this kernel lacks: skipped, not made
    writes = len(env.executor.events())
    env.tick()
    assert len(env.executor.events()) == writes  # nothing changed, nothing written
    plugin.shutdown()
    assert env.fake.read(MIN_FREE).strip() == "67584"
    assert env.fake.read(WSF).strip() == "10"
    assert env.fake.read(FEATURES).strip() == "GENTLE_FAIR_SLEEPERS"


def test_a_field_dropped_from_the_nodeslo_gets_the_original_back(env: NodeQoSEnv) -> None:
    env.slo({"systemStrategy": {"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150}})
    env.start(SystemConfig())
    env.tick()
    env.slo({"systemStrategy": {"watermarkScaleFactor": 200}})
    env.tick()
    assert env.fake.read(MIN_FREE).strip() == "67584"
    assert env.fake.read(WSF).strip() == "200"


def test_out_of_range_values_are_refused_and_logged_once(
    env: NodeQoSEnv, caplog: pytest.LogCaptureFixture
) -> None:
    # 1 GiB node, factor 5: 1048576 KiB * 5 / 10000 = 524 KiB, below koordlet's 10240 floor
    env.states.node_info = make_node(1000, 1 * GI)
    env.slo({"systemStrategy": {"minFreeKbytesFactor": 5, "watermarkScaleFactor": 150}})
    env.start(SystemConfig())
    with caplog.at_level(logging.WARNING):
        env.tick()
        env.tick()
    assert env.fake.read(MIN_FREE).strip() == "67584"
    assert env.fake.read(WSF).strip() == "150"  # the other field is not held back
    assert caplog.text.count("min_free_kbytes=524 refused") == 1


def test_wanted_without_a_node_skips_min_free_kbytes() -> None:
    from koordlet import api
    from koordshared.apis.slo import nodeslo

    slo = nodeslo.build({"systemStrategy": {"minFreeKbytesFactor": 100, "schedIdleSaverWmark": 3}})
    assert wanted(slo, None) == [("sched_idle_saver_wmark", "3")]
    assert wanted(api.NodeSLO(), make_node(1000, GI)) == []
