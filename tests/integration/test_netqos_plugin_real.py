"""TCNetworkQoS on the real kernel, driven from a NodeSLO: the plugin shapes the veth end of namespace A
(the agent's executor, in that namespace) for an LS and a BE pod whose IPs the test assigned; concurrent
iperf3 flows show BE held within 10 % of its ceiling while LS gets at least its guaranteed rate, a
NodeSLO change moves BE's ceiling live, and at stop no qdisc, class, filter or IFB device is left."""

from __future__ import annotations

import dataclasses
import subprocess
from typing import Any

import pytest

from koordlet import api
from koordlet.testing import make_pod
from qosplugins.netqos import TCNetworkQoS
from tests.integration.netns import BE_IP, LS_IP, Pair, flows
from tests.support.fakehost import FakeHost
from tests.unit.qosplugins.nodeqos import NodeQoSEnv

pytestmark = [pytest.mark.root, pytest.mark.tool("iperf3", "ip", "tc"), pytest.mark.slow]


def nodeslo(be_limit: str) -> dict[str, Any]:
    return {
        "systemStrategy": {"totalNetworkBandwidth": "400M"},
        "resourceQOSStrategy": {
            "lsClass": {"networkQOS": {"enable": True, "egressRequest": "50M", "egressLimit": "150M"}},
            "beClass": {"networkQOS": {"enable": True, "egressRequest": "10M", "egressLimit": be_limit}},
        },
    }


def test_be_at_its_ceiling_ls_at_its_rate_live_change_and_nothing_left(
    fake_host: FakeHost, veth_pair: Pair
) -> None:
    env = NodeQoSEnv(fake_host, netns=veth_pair.a)
    env.options["tc-network-qos-uplink"] = veth_pair.dev
    env.states.pod_list += [
        dataclasses.replace(make_pod("web", api.QOSClass.LS), ips=(LS_IP,)),
        dataclasses.replace(make_pod("batch", api.QOSClass.BE), ips=(BE_IP,)),
    ]
    env.slo(nodeslo("40M"))
    plugin = env.start(TCNetworkQoS())
    try:
        env.tick()
        egress = flows(veth_pair)
        print(f"egress: LS {egress['LS']:.1f} Mbit/s, BE {egress['BE']:.1f} Mbit/s (BE ceil 40, LS rate 50)")
        assert abs(egress["BE"] - 40) <= 4, egress
        assert egress["LS"] >= 50, egress

        env.slo(nodeslo("20M"))
        env.tick()
        after = flows(veth_pair)
        print(
            f"after the NodeSLO change: LS {after['LS']:.1f} Mbit/s, BE {after['BE']:.1f} Mbit/s (BE ceil 20)"
        )
        assert abs(after["BE"] - 20) <= 2, after
        assert after["LS"] >= 50, after
    finally:
        plugin.shutdown()
    state = env.executor.tc.state(veth_pair.dev)
    assert state.uplink is not None and not state.uplink.has_our_root and state.ifb is None
    assert not state.uplink.classes and not state.uplink.filters and not state.uplink.ingress
    for what in ("qdisc", "class", "filter"):
        shown = subprocess.run(
            ["ip", "netns", "exec", veth_pair.a, "tc", what, "show", "dev", veth_pair.dev],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "htb" not in shown and "u32" not in shown and "ingress" not in shown, (what, shown)
