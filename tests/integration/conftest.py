"""Fixtures shared by the integration tests on the real kernel."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordlet.testing import devices
from koordlet.testing.cgroups import RealKubepods
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401 (fixtures)
from tests.integration.cluster import cluster_factory  # noqa: F401 (fixture)
from tests.integration.koordscheduler_env import cluster, points_site, schedulers  # noqa: F401 (fixtures)
from tests.integration.netns import BE_IP, LS_IP, SERVER, Pair, start_servers


@pytest.fixture
def kubepods() -> Iterator[RealKubepods]:
    """A kubelet-like kubepods tree under a unique parent, removed (with its processes) afterwards."""
    kp = RealKubepods()
    try:
        yield kp
    finally:
        kp.cleanup()


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[str]:
    """A 96 MiB loop device (root, losetup), detached afterwards."""
    with devices.loop_device(tmp_path, 96 << 20) as dev:
        yield dev


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
        servers += start_servers(pair)
        yield pair
    finally:
        for s in servers:
            s.kill()
            s.wait()
        for ns in (pair.a, pair.b):
            if Path("/var/run/netns", ns).exists():
                netns.remove(ns)
