"""Network QoS on the real kernel: two network namespaces the test makes, joined by a veth pair; the
executor shapes the veth end in namespace A (egress HTB, ingress through an IFB device), and concurrent
iperf3 flows from LS and BE addresses the test assigned measure what each class gets. Only the veth
addresses inside these namespaces carry traffic; both namespaces (and so every device) are removed."""

from __future__ import annotations

import dataclasses
import ipaddress
import subprocess

import pytest
from prometheus_client import CollectorRegistry

from koordlet.api.netqos import ClassLimit, DirectionSpec, NetQoSSpec
from koordlet.resourceexecutor.config import ExecutorConfig
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system.cgroups import CgroupMode
from koordlet.system.paths import HostPaths
from tests.integration.netns import BE_IP, LS_IP, M, Pair, flows

pytestmark = [pytest.mark.root, pytest.mark.tool("iperf3", "ip", "tc"), pytest.mark.slow]


def _spec(pair: Pair, be_egress_ceil: int) -> NetQoSSpec:
    return NetQoSSpec(
        pair.dev,
        egress=DirectionSpec(400 * M, ClassLimit(50 * M, 150 * M), ClassLimit(10 * M, be_egress_ceil)),
        ingress=DirectionSpec(400 * M, ClassLimit(50 * M, 150 * M), ClassLimit(10 * M, 30 * M)),
        ls_ips=frozenset({ipaddress.ip_address(LS_IP)}),
        be_ips=frozenset({ipaddress.ip_address(BE_IP)}),
    )


def test_be_is_held_at_its_ceil_ls_gets_its_rate_live_change_and_full_removal(veth_pair: Pair) -> None:
    ex = ResourceExecutor(
        HostPaths(),
        config=ExecutorConfig(netns=veth_pair.a),
        registry=CollectorRegistry(),
        mode=CgroupMode.V1,
    )
    spec = _spec(veth_pair, 40 * M)
    res = ex.tc.apply(spec, owner="TCNetworkQoS", reason="nodeslo")
    assert res.written, res
    assert ex.tc.apply(spec, owner="TCNetworkQoS", force=True).skipped == "unchanged"  # read back: equal

    egress = flows(veth_pair)
    print(f"egress: LS {egress['LS']:.1f} Mbit/s, BE {egress['BE']:.1f} Mbit/s (BE ceil 40, LS rate 50)")
    assert abs(egress["BE"] - 40) <= 4, egress
    assert egress["LS"] >= 50, egress

    ingress = flows(veth_pair, reverse=True)
    print(f"ingress: LS {ingress['LS']:.1f} Mbit/s, BE {ingress['BE']:.1f} Mbit/s (BE ceil 30, LS rate 50)")
    assert abs(ingress["BE"] - 30) <= 3, ingress
    assert ingress["LS"] >= 50, ingress

    # a NodeSLO change: only BE's egress class changes, live
    lowered = dataclasses.replace(spec, egress=_spec(veth_pair, 20 * M).egress)
    events = len(ex.events())
    assert ex.tc.apply(lowered, owner="TCNetworkQoS", reason="nodeslo").written
    steps = [e["after"] for e in ex.events()[events:]]
    assert len(steps) == 1 and "change-class class 1:4" in str(steps[0]), steps
    after = flows(veth_pair)
    print(f"egress after change: LS {after['LS']:.1f} Mbit/s, BE {after['BE']:.1f} Mbit/s (BE ceil 20)")
    assert abs(after["BE"] - 20) <= 2, after
    assert after["LS"] >= 50, after

    assert ex.tc.remove(veth_pair.dev, owner="TCNetworkQoS", reason="stop").written
    state = ex.tc.state(veth_pair.dev)
    assert state.uplink is not None and state.ifb is None
    assert not state.uplink.has_our_root and state.uplink.root_handle == 0  # the kernel's default again
    assert not state.uplink.ingress and not state.uplink.classes and not state.uplink.filters
    shown = subprocess.run(
        ["ip", "netns", "exec", veth_pair.a, "tc", "filter", "show", "dev", veth_pair.dev],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == ""
    links = subprocess.run(
        ["ip", "-n", veth_pair.a, "-o", "link"], capture_output=True, text=True, check=True
    )
    assert "ifb" not in links.stdout
    assert ex.tc.remove(veth_pair.dev, owner="TCNetworkQoS").skipped == "unchanged"
