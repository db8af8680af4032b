"""TCNetworkQoS through the agent's executor on a kernel-like tc fake: HTB rates from the NodeSLO
(percents and quantities), pods classified by IP, live changes, removal when off and at stop, and nothing
touched without an uplink."""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
from typing import Any

import pytest

from koordlet import api
from koordlet.system.netqos import BE_CLASS, LS_CLASS, ROOT_CLASS, SYSTEM_CLASS
from koordlet.testing import make_pod
from qosplugins.netqos import TCNetworkQoS, build_spec
from tests.support.fakehost import FakeHost
from tests.unit.koordlet.system.faketc import FakeKernel
from tests.unit.qosplugins.nodeqos import NodeQoSEnv

M = 1_000_000
NETQOS: dict[str, Any] = {
    "systemStrategy": {"totalNetworkBandwidth": "1000M"},
    "resourceQOSStrategy": {
        # an integer is a percent of the link, a string a quantity in bit/s
        "lsClass": {"networkQOS": {"enable": True, "egressRequest": 50, "egressLimit": "800M"}},
        "beClass": {"networkQOS": {"enable": True, "egressRequest": "10M", "egressLimit": 20}},
    },
}


def with_ips(pod: api.PodInfo, *ips: str, host_network: bool = False) -> api.PodInfo:
    return dataclasses.replace(pod, ips=ips, host_network=host_network)


@pytest.fixture
def env(fake_host: FakeHost) -> tuple[NodeQoSEnv, FakeKernel]:
    env = NodeQoSEnv(fake_host)
    kernel = FakeKernel("eth0")
    env.executor.tc._backend = lambda netns: kernel
    env.options["tc-network-qos-uplink"] = "eth0"
    env.states.pod_list += [
        with_ips(make_pod("ls", api.QOSClass.LS), "10.0.0.2"),
        with_ips(make_pod("lsr", api.QOSClass.LSR), "10.0.0.3", "fd00::3"),
        with_ips(make_pod("be", api.QOSClass.BE), "10.0.0.9"),
        with_ips(make_pod("hostnet", api.QOSClass.BE), "192.168.1.5", host_network=True),
        with_ips(make_pod("done", api.QOSClass.BE, phase="Succeeded"), "10.0.0.10"),
    ]
    return env, kernel


def rates(kernel: FakeKernel, dev: str = "eth0") -> dict[int, tuple[int, int, int]]:
    """Class handle -> (rate, ceil) in bit/s and prio, as the kernel holds them."""
    return {h: (c.rate * 8, c.ceil * 8, c.prio) for h, c in kernel.devs[dev].classes.items()}


def classified(kernel: FakeKernel) -> dict[str, int]:
    return {str(f.ip): f.classid for f in kernel.devs["eth0"].filters if f.ip is not None and f.classid}


def test_classes_from_the_nodeslo_pods_by_ip_live_change_and_stop(env: tuple[NodeQoSEnv, FakeKernel]) -> None:
    e, kernel = env
    e.slo(NETQOS)
    plugin = e.start(TCNetworkQoS())
    e.tick()
    assert rates(kernel) == {
        ROOT_CLASS: (1000 * M, 1000 * M, 0),
        # system keeps what LS and BE are not guaranteed: 1000 - 500 - 10
        SYSTEM_CLASS: (490 * M, 1000 * M, 1),
        LS_CLASS: (500 * M, 800 * M, 2),
        BE_CLASS: (10 * M, 200 * M, 3),
    }
    assert classified(kernel) == {
        "10.0.0.2": LS_CLASS,
        "10.0.0.3": LS_CLASS,
        "fd00::3": LS_CLASS,
        "10.0.0.9": BE_CLASS,
    }
    assert "kifb-eth0" not in kernel.devs  # no ingress value: ingress is not shaped
    steps = len(kernel.executed)
    e.tick()
    assert len(kernel.executed) == steps  # unchanged: nothing done
    # NodeSLO change and a new BE pod: one class changed, one filter added
    spec = dict(
        NETQOS,
        resourceQOSStrategy={
            **NETQOS["resourceQOSStrategy"],
            "beClass": {"networkQOS": {"enable": True, "egressLimit": 5}},
        },
    )
    e.slo(spec)
    e.states.pod_list.append(with_ips(make_pod("be2", api.QOSClass.BE), "10.0.0.11"))
    e.tick()
    assert rates(kernel)[BE_CLASS][:2] == (api.MIN_RATE_BPS, 50 * M)
    assert [op.kind for op in kernel.executed[steps:]] == ["change-class", "change-class", "add-filter"]
    plugin.shutdown()
    dev = kernel.devs["eth0"]
    assert not dev.classes and not dev.filters and dev.root[0] != "htb"


def test_ingress_through_an_ifb_when_a_class_sets_it(env: tuple[NodeQoSEnv, FakeKernel]) -> None:
    e, kernel = env
    spec = {
        "systemStrategy": {"totalNetworkBandwidth": "100M"},
        "resourceQOSStrategy": {"beClass": {"networkQOS": {"enable": True, "ingressLimit": 30}}},
    }
    e.slo(spec)
    e.start(TCNetworkQoS())
    e.tick()
    assert rates(kernel, "kifb-eth0")[BE_CLASS][:2] == (api.MIN_RATE_BPS, 30 * M)
    # LS disabled: its pods stay classified, with the whole link as ceiling
    assert rates(kernel)[LS_CLASS][:2] == (api.MIN_RATE_BPS, 100 * M)
    assert rates(kernel)[BE_CLASS][:2] == (api.MIN_RATE_BPS, 100 * M)  # no egress limit: the link


def test_off_in_the_nodeslo_removes_everything(env: tuple[NodeQoSEnv, FakeKernel]) -> None:
    e, kernel = env
    e.slo(NETQOS)
    e.start(TCNetworkQoS())
    e.tick()
    assert kernel.devs["eth0"].classes
    off = dict(
        NETQOS,
        resourceQOSStrategy={**NETQOS["resourceQOSStrategy"], "policies": {"netQOSPolicy": "terway-qos"}},
    )
    e.slo(off)
    e.tick()
    assert not kernel.devs["eth0"].classes and kernel.devs["eth0"].root[0] != "htb"


def test_without_an_uplink_nothing_is_touched(
    env: tuple[NodeQoSEnv, FakeKernel], caplog: pytest.LogCaptureFixture
) -> None:
    e, kernel = env
    e.options["tc-network-qos-uplink"] = ""
    e.slo(NETQOS)
    with caplog.at_level(logging.WARNING):
        plugin = e.start(TCNetworkQoS())
    assert e.scheduled == []
    assert "no --tc-network-qos-uplink: network QoS touches nothing" in caplog.text
    plugin.shutdown()
    assert kernel.executed == []


def test_rates_the_link_cannot_hold_are_refused_once(
    env: tuple[NodeQoSEnv, FakeKernel], caplog: pytest.LogCaptureFixture
) -> None:
    e, kernel = env
    over = {
        "systemStrategy": {"totalNetworkBandwidth": "100M"},
        "resourceQOSStrategy": {
            "lsClass": {"networkQOS": {"enable": True, "egressRequest": 80}},
            "beClass": {"networkQOS": {"enable": True, "egressRequest": 40}},
        },
    }
    e.slo(over)
    e.start(TCNetworkQoS())
    with caplog.at_level(logging.WARNING):
        e.tick()
        e.tick()
    assert kernel.executed == []
    assert caplog.text.count("on eth0 refused") == 1  # the plugin's own line: once
    assert caplog.text.count("LS + BE rates exceed the link (owner TCNetworkQoS") == 1  # the executor too


def test_build_spec_is_off_without_a_link_speed_or_an_enabled_class() -> None:
    from koordshared.apis.slo import nodeslo

    pods = [with_ips(make_pod("be", api.QOSClass.BE), "10.0.0.9")]
    assert (
        build_spec("eth0", nodeslo.build({"resourceQOSStrategy": NETQOS["resourceQOSStrategy"]}), pods)
        is None
    )
    assert (
        build_spec("eth0", nodeslo.build({"systemStrategy": {"totalNetworkBandwidth": "1G"}}), pods) is None
    )
    spec = build_spec("eth0", nodeslo.build(NETQOS), pods)
    assert spec is not None and spec.be_ips == {ipaddress.ip_address("10.0.0.9")}
