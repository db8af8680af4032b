"""Network QoS on the real kernel: two network namespaces the test makes, joined by a veth pair; the
executor shapes the veth end in namespace A (egress HTB, ingress through an IFB device), and concurrent
iperf3 flows from LS and BE addresses the test assigned measure what each class gets. Only the veth
addresses inside these namespaces carry traffic; both namespaces (and so every device) are removed."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from koordlet.api.netqos import ClassLimit, DirectionSpec, NetQoSSpec
from koordlet.resourceexecutor.executor import ExecutorConfig, ResourceExecutor
from koordlet.system.cgroups import CgroupMode
from koordlet.system.paths import HostPaths

pytestmark = [pytest.mark.root, pytest.mark.tool("iperf3", "ip", "tc"), pytest.mark.slow]

M = 1_000_000
SERVER, LS_IP, BE_IP = "192.0.2.2", "192.0.2.10", "192.0.2.20"
LS_PORT, BE_PORT = 5301, 5302


@dataclass
class Pair:
    a: str
    b: str
    dev: str


@pytest.fixture
def veth_pair() -> Iterator[Pair]:
    from pyroute2 import IPRoute, netns

    tag = uuid.uuid4().hex[:6]
    pair = Pair(f"kqos-{tag}-a", f"kqos-{tag}-b", f"kq{tag}a")
    servers: list[subprocess.Popen[bytes]] = []
    netns.create(pair.a)
    try:
        netns.create(pair.b)
        with IPRoute(netns=pair.a) as ipa:
            ipa.link("add", ifname=pair.dev, kind="veth", peer={"ifname": f"kq{tag}b", "net_ns_fd": pair.b})
            idx = ipa.link_lookup(ifname=pair.dev)[0]
            for addr in ("192.0.2.1", LS_IP, BE_IP):
                ipa.addr("add", index=idx, address=addr, prefixlen=24)
            # jumbo frames: the headers HTB counts and iperf3 does not are then under 1 % of a frame
            ipa.link("set", index=idx, mtu=9000, state="up")
            ipa.link("set", index=ipa.link_lookup(ifname="lo")[0], state="up")
        with IPRoute(netns=pair.b) as ipb:
            idx = ipb.link_lookup(ifname=f"kq{tag}b")[0]
            ipb.addr("add", index=idx, address=SERVER, prefixlen=24)
            ipb.link("set", index=idx, mtu=9000, state="up")
            ipb.link("set", index=ipb.link_lookup(ifname="lo")[0], state="up")
        for port in (LS_PORT, BE_PORT):
            servers.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", pair.b, "iperf3", "-s", "-B", SERVER, "-p", str(port)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        yield pair
    finally:
        for s in servers:
            s.kill()
            s.wait()
        for ns in (pair.a, pair.b):
            if Path("/var/run/netns", ns).exists():
                netns.remove(ns)


def _flows(pair: Pair, *, reverse: bool = False, seconds: int = 3) -> dict[str, float]:
    """Concurrent LS and BE TCP flows; Mbit/s each got as the receiver counted (first second omitted)."""
    procs = {
        name: subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                pair.a,
                "iperf3",
                "-c",
                SERVER,
                "-p",
                str(port),
                "-B",
                src,
                "-t",
                str(seconds),
            ]
            + ["-O", "1", "-J", "--connect-timeout", "3000"]
            + (["-R"] if reverse else []),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name, port, src in (("LS", LS_PORT, LS_IP), ("BE", BE_PORT, BE_IP))
    }
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=seconds + 30)
        report = json.loads(stdout or b"{}")
        assert proc.returncode == 0, (name, report.get("error"), stderr[-500:])
        out[name] = report["end"]["sum_received"]["bits_per_second"] / M
    return out


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

    egress = _flows(veth_pair)
    print(f"egress: LS {egress['LS']:.1f} Mbit/s, BE {egress['BE']:.1f} Mbit/s (BE ceil 40, LS rate 50)")
    assert abs(egress["BE"] - 40) <= 4, egress
    assert egress["LS"] >= 50, egress

    ingress = _flows(veth_pair, reverse=True)
    print(f"ingress: LS {ingress['LS']:.1f} Mbit/s, BE {ingress['BE']:.1f} Mbit/s (BE ceil 30, LS rate 50)")
    assert abs(ingress["BE"] - 30) <= 3, ingress
    assert ingress["LS"] >= 50, ingress

    # a NodeSLO change: only BE's egress class changes, live
    lowered = dataclasses.replace(spec, egress=_spec(veth_pair, 20 * M).egress)
    events = len(ex.events())
    assert ex.tc.apply(lowered, owner="TCNetworkQoS", reason="nodeslo").written
    steps = [e["after"] for e in ex.events()[events:]]
    assert len(steps) == 1 and "change-class class 1:4" in str(steps[0]), steps
    after = _flows(veth_pair)
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
