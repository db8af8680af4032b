"""One reconcile pass of the node QoS II plugins over 200 pods on the real kernel (root): nothing changed
against everything changed, in ms and writes per pass, beside the floor of writing the same values.

A kubelet-like tree of N pods (half LS, half BE, one container each) under a unique test parent, in the
cpu, cpuacct, cpuset, memory and blkio controllers; a loop device for block throttles; a network namespace
with a veth uplink for tc (pod IPs as filters). The plugins are the built-ins with the agent's real host
and executor: CgroupReconcile (v1 soft limits here), SystemConfig (this machine's vm tunables, put back at
the end), BlkIOReconcile (the BE class's throttles, shared out to the BE containers), TCNetworkQoS and
RdtResctrl (which finds no resctrl on a VM and says so once). Two NodeSLOs that differ in every value the
plugins manage alternate (with the pods' IPs shifted), so each "changed" pass rewrites everything; a
"nothing changed" pass repeats the last NodeSLO. The floor is writing the changed pass's cgroup and
/proc/sys values with raw write(2)s of the same files, measured right after it (tc has no floor here:
its netlink steps are timed apart). ``ratio`` = the cgroup and sysctl plugins' changed pass / floor.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import ipaddress
import json
import logging
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metrics import PluginMetrics
from koordlet.resourceexecutor.config import ExecutorConfig
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system import native
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeEvictor, FakeMetrics, FakeStates, make_node
from koordlet.testing.cgroups import KUBEPODS_CONTROLLERS, RealKubepods
from koordlet.testing.devices import loop_device
from koordshared.apis.slo import nodeslo
from qosplugins.blkio import BlkIOReconcile
from qosplugins.cgreconcile import CgroupReconcile
from qosplugins.netqos import TCNetworkQoS
from qosplugins.resctrl import RdtResctrl
from qosplugins.sysreconcile import SystemConfig

NAME = "qos_reconcile"
MIB = 1 << 20
VM = Path("/proc/sys/vm")


def spec(variant: int, loop: str, wsf: int) -> dict[str, Any]:
    """NodeSLO ``variant`` (0 or 1): every managed value differs between the two."""
    return {
        "systemStrategy": {"watermarkScaleFactor": wsf + 1 + variant, "totalNetworkBandwidth": "10G"},
        "resourceQOSStrategy": {
            "lsClass": {
                "memoryQOS": {"enable": True, "lowLimitPercent": 40 + 20 * variant},
                "networkQOS": {"enable": True, "egressRequest": 30 + variant, "egressLimit": 80 - variant},
            },
            "beClass": {
                "memoryQOS": {"enable": True},
                "networkQOS": {"enable": True, "egressRequest": 5 + variant, "egressLimit": 20 + variant},
                "blkioQOS": {
                    "enable": bool(loop),
                    "blocks": [
                        {
                            "name": loop,
                            "ioCfg": {"readBPS": (100 + variant) * MIB, "writeIOPS": 900 + 100 * variant},
                        }
                    ]
                    if loop
                    else [],
                },
            },
        },
    }


@contextlib.contextmanager
def block_device() -> Iterator[str]:
    """A loop device, or ``""`` where ``losetup`` is missing (then block throttles are not measured)."""
    if shutil.which("losetup") is None:
        yield ""
        return
    with tempfile.TemporaryDirectory() as d, loop_device(Path(d), 16 * MIB) as dev:
        yield dev


@contextlib.contextmanager
def uplink_namespace() -> Iterator[tuple[str, str]]:
    from pyroute2 import IPRoute, netns

    ns = f"kqbench-{uuid.uuid4().hex[:6]}"
    netns.create(ns)
    try:
        with IPRoute(netns=ns) as ip:
            # a veth pair (this kernel has no dummy devices); its peer stays down, nothing is sent
            ip.link("add", ifname="up0", kind="veth", peer={"ifname": "up0p"})
            ip.link("set", index=ip.link_lookup(ifname="up0")[0], state="up")
        yield ns, "up0"
    finally:
        netns.remove(ns)


def pods_of(kp: RealKubepods, n: int, shift: int) -> list[api.PodInfo]:
    out = []
    for i, pod in enumerate(kp.pods[:n]):
        be = pod.qos is api.KubeQOSClass.BESTEFFORT
        c = pod.containers[0]
        ip = ipaddress.ip_address("10.64.0.0") + 1 + (i + shift) % 60000
        container = api.ContainerInfo(
            "main",
            c.container_id,
            cgroup_dir=c.cgroup_dir,
            memory_request_bytes=0 if be else 256 * MIB,
            memory_limit_bytes=0 if be else 512 * MIB,
            batch_memory_request_bytes=64 * MIB if be else 0,
        )
        out.append(
            api.PodInfo(
                uid=pod.uid,
                namespace="bench",
                name=f"p{i}",
                qos=api.QOSClass.BE if be else api.QOSClass.LS,
                kube_qos=pod.qos,
                cgroup_dir=pod.cgroup_dir,
                containers=(container,),
                ips=(str(ip),),
            )
        )
    return out


def context(
    name: str, states: FakeStates, host: Host, ex: ResourceExecutor, options: dict[str, Any]
) -> api.PluginContext:
    return api.PluginContext(
        node_name="bench",
        options=options,
        states=states,
        metrics=FakeMetrics(time.monotonic),
        host=host,
        executor=ex,
        evictor=FakeEvictor(),
        clock=time.monotonic,
        logger=logging.getLogger(f"bench.{name}"),
        every=lambda _i, _fn: None,
        subscribe=lambda _e, _fn: None,
        registry=PluginMetrics(CollectorRegistry()),
    )


def floor_ms(events: list[dict[str, object]]) -> float:
    """Writing the pass's cgroup and /proc/sys values again with raw write(2)s (the kernel's own cost)."""
    items = [(str(e["path"]), str(e["after"])) for e in events if str(e["path"]).startswith("/")]
    start = time.perf_counter()
    native.write_batch(items)
    return (time.perf_counter() - start) * 1000


def run(pods: int, rounds: int) -> dict[str, Any]:
    kp = RealKubepods(controllers=(*KUBEPODS_CONTROLLERS, "blkio"))
    saved = {n: (VM / n).read_text().strip() for n in ("watermark_scale_factor",)}
    plugins: list[api.QOSPlugin] = []
    try:
        for i in range(pods):
            pod = kp.add_pod(api.KubeQOSClass.BESTEFFORT if i % 2 else api.KubeQOSClass.BURSTABLE)
            kp.add_container(pod)
        with block_device() as loop, uplink_namespace() as (ns, uplink):
            paths = dataclasses.replace(HostPaths(), cgroup_parent=f"/{kp.parent}")
            host = Host(paths, driver=CgroupDriver.CGROUPFS)
            ex = ResourceExecutor(paths, config=ExecutorConfig(netns=ns), registry=CollectorRegistry())
            states = FakeStates(
                make_node(2000, 24 << 30, memory_allocatable_bytes=22 << 30), pods_of(kp, pods, 0)
            )
            wsf = min(int(saved["watermark_scale_factor"]), 397)
            options = {"tc-network-qos-uplink": uplink}
            plugins = [RdtResctrl(), CgroupReconcile(), SystemConfig(), BlkIOReconcile(), TCNetworkQoS()]
            for p in plugins:
                p.setup(context(p.name, states, host, ex, options))
                p.run(threading.Event())

            def one_pass() -> tuple[dict[str, float], list[dict[str, object]]]:
                """Milliseconds per plugin, and the writes of the pass (the executor's audit log)."""
                last = ex.events(limit=1)
                seq = int(str(last[-1]["seq"])) if last else 0
                ms: dict[str, float] = {}
                for p in plugins:
                    start = time.perf_counter()
                    p.reconcile()  # type: ignore[attr-defined]
                    ms[p.name] = (time.perf_counter() - start) * 1000
                return ms, ex.events(since_seq=seq, limit=100_000)

            states.slo = nodeslo.build(spec(0, loop, wsf))
            one_pass()  # first sight: originals are read, everything written once
            changed, cg_changed, tc_changed, unchanged, floors, writes, cg_writes = [], [], [], [], [], [], []
            by_plugin: dict[str, list[float]] = {}
            for r in range(rounds):
                variant = (r + 1) % 2
                states.slo = nodeslo.build(spec(variant, loop, wsf))
                states.pod_list = pods_of(kp, pods, variant * pods)
                ms, events = one_pass()
                changed.append(sum(ms.values()))
                tc_changed.append(ms["TCNetworkQoS"])
                cg_changed.append(sum(ms.values()) - ms["TCNetworkQoS"])
                writes.append(len(events))
                cg_writes.append(sum(1 for e in events if str(e["path"]).startswith("/")))
                floors.append(floor_ms(events))
                ms, events = one_pass()
                unchanged.append(sum(ms.values()))
                for name, v in ms.items():
                    by_plugin.setdefault(name, []).append(v)
                assert not events, f"a repeated NodeSLO wrote {len(events)} values"
            for p in plugins:
                p.shutdown()
            plugins = []
    finally:
        for p in plugins:
            with contextlib.suppress(Exception):
                p.shutdown()
        for tunable, value in saved.items():
            if (VM / tunable).read_text().strip() != value:
                (VM / tunable).write_text(value)
        kp.cleanup()
    cg_ms, floor = statistics.median(cg_changed), statistics.median(floors)
    return {
        "bench": NAME,
        "pods": pods,
        "changed_pass_ms": round(statistics.median(changed), 2),
        "changed_writes": int(statistics.median(writes)),
        "changed_cgroup_sysctl_ms": round(cg_ms, 2),
        "changed_cgroup_sysctl_writes": int(statistics.median(cg_writes)),
        "changed_tc_ms": round(statistics.median(tc_changed), 2),
        "changed_tc_steps": int(statistics.median(writes)) - int(statistics.median(cg_writes)),
        "unchanged_pass_ms": round(statistics.median(unchanged), 2),
        "unchanged_writes": 0,
        "unchanged_ms_by_plugin": {k: round(statistics.median(v), 2) for k, v in by_plugin.items()},
        "floor_write_ms": round(floor, 2),
        "ratio": round(cg_ms / floor, 2) if floor > 0 else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pods", type=int, default=200)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print(json.dumps({"bench": NAME, "skipped": "needs root for cgroups, a loop device and a netns"}))
        return
    logging.basicConfig(level=logging.WARNING)
    result = run(args.pods, 3 if args.quick else 9)
    r = result
    print(f"{r['pods']} pods, everything changed: {r['changed_pass_ms']} ms, {r['changed_writes']} writes")
    cg, n = r["changed_cgroup_sysctl_ms"], r["changed_cgroup_sysctl_writes"]
    print(f"  cgroups and sysctls: {cg} ms for {n} writes (as raw write(2)s: {r['floor_write_ms']} ms)")
    print(f"  tc: {r['changed_tc_ms']} ms for {r['changed_tc_steps']} netlink steps")
    print(f"{r['pods']} pods, nothing changed: {r['unchanged_pass_ms']} ms, 0 writes")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
