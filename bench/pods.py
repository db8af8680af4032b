"""Pod refresh cost for 500 pods: from a kubelet PodList over loopback, and from cgroup discovery.

Kubelet: a fake kubelet (``koordlet.testing.kubelet``) serves a 500-pod PodList on 127.0.0.1; the agent's
``PodsInformer.refresh()`` (HTTP GET, JSON decode, QoS/priority/resources/container-ID validation, cgroup
dirs) is timed against its floor, the same GET plus ``json.loads`` and nothing else. Discovery: 500 pod
dirs, each with one container dir, under a unique ``koordlet-test-<random>`` parent in the real v1 cpu
controller when run as root (a tmp tree otherwise); ``refresh()`` of the standalone discovery source is
timed against a bare ``os.scandir`` walk of the same three tiers. Rounds alternate agent and floor;
medians are reported. ``ratio`` is the kubelet refresh over its floor. Everything created is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

from koordlet import api
from koordlet.statesinformer.discovery import CgroupDiscovery
from koordlet.statesinformer.pods import KubeletEndpoint, KubeletPodSource, PodsInformer
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver, CgroupLayout
from koordlet.testing.cgroups import RealCgroupTree
from koordlet.testing.kubelet import FakeKubelet, pod_object

NAME = "pods"
N_PODS = 500
QOS = (api.KubeQOSClass.GUARANTEED, api.KubeQOSClass.BURSTABLE, api.KubeQOSClass.BESTEFFORT)
QOS_NAME = {
    api.KubeQOSClass.GUARANTEED: "Guaranteed",
    api.KubeQOSClass.BURSTABLE: "Burstable",
    api.KubeQOSClass.BESTEFFORT: "BestEffort",
}


def pod_specs(n: int) -> list[tuple[str, api.KubeQOSClass, str]]:
    return [(str(uuid.uuid4()), QOS[i % 3], f"{uuid.uuid4().hex}{uuid.uuid4().hex}") for i in range(n)]


def median_ms(fn: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def alternate(agent: Callable[[], object], floor: Callable[[], object], rounds: int) -> tuple[float, float]:
    a: list[float] = []
    f: list[float] = []
    agent()  # warm-up (imports, first connection)
    floor()
    for _ in range(rounds):
        a += median_ms(agent, 1)
        f += median_ms(floor, 1)
    return statistics.median(a), statistics.median(f)


def bench_kubelet(specs: list[tuple[str, api.KubeQOSClass, str]], rounds: int) -> dict[str, float]:
    layout = CgroupLayout.create(CgroupDriver.CGROUPFS)
    pods = [
        pod_object(
            uid,
            f"pod-{i}",
            namespace=f"ns-{i % 20}",
            qos_class=QOS_NAME[qos],
            container_id=f"containerd://{cid}",
            labels={
                "app": f"a{i}",
                "koordinator.sh/qosClass": "BE" if qos is api.KubeQOSClass.BESTEFFORT else "LS",
            },
            requests={"cpu": "250m", "memory": "256Mi", "kubernetes.io/batch-cpu": "500"},
            limits={"cpu": "1", "memory": "512Mi"},
        )
        for i, (uid, qos, cid) in enumerate(specs)
    ]
    with FakeKubelet() as kubelet:
        kubelet.set_pods(pods)
        ep = KubeletEndpoint(address="127.0.0.1", insecure=True, read_only_port=kubelet.port, timeout=10)
        informer = PodsInformer(
            KubeletPodSource(lambda: ep), lambda: layout, clock=time.monotonic, staleness=60
        )

        def floor() -> object:
            with urllib.request.urlopen(ep.url, timeout=10) as resp:
                return json.loads(resp.read())

        agent_ms, floor_ms = alternate(informer.refresh, floor, rounds)
        assert len(informer.pods()) == N_PODS, len(informer.pods())
    return {"kubelet_refresh_ms": agent_ms, "kubelet_floor_ms": floor_ms}


def build_tree(paths: HostPaths, specs: list[tuple[str, api.KubeQOSClass, str]]) -> RealCgroupTree:
    """Pod + container dirs in the cpu hierarchy under the paths' cgroup parent (removed by cleanup())."""
    layout = CgroupLayout.create(CgroupDriver.CGROUPFS, paths.cgroup_parent)
    parent = paths.cgroup_parent.strip("/")
    tree = RealCgroupTree(("cpu",), root=paths.cgroup_root, parent=parent)

    def mk(cgroup_dir: str) -> None:
        tree.mkdir(cgroup_dir.removeprefix(parent + "/"))

    for qos in QOS:
        mk(layout.qos_dir(qos))
    for uid, qos, cid in specs:
        mk(layout.container_dir(uid, qos, cid))
    return tree


def bench_discovery(specs: list[tuple[str, api.KubeQOSClass, str]], rounds: int) -> dict[str, float | str]:
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if os.geteuid() == 0 and detect_mode(HostPaths()) is CgroupMode.V1:
        paths = HostPaths(cgroup_parent=f"/koordlet-test-{uuid.uuid4().hex[:8]}")
        tree = "real-cgroup-v1"
    else:
        tmp = tempfile.TemporaryDirectory()
        root = Path(tmp.name)
        (root / "cgroup" / "cpu").mkdir(parents=True)
        paths = HostPaths(cgroup_root=root / "cgroup", cgroup_parent="/koordlet-test-bench")
        tree = "tmp-dir"
    mode = CgroupMode.V1
    made: RealCgroupTree | None = None
    try:
        made = build_tree(paths, specs)
        host = Host(paths, mode=mode, driver=CgroupDriver.CGROUPFS)
        informer = PodsInformer(
            CgroupDiscovery(host), lambda: host.layout, clock=time.monotonic, staleness=60
        )
        tiers = [paths.cgroup_root / "cpu" / host.layout.qos_dir(q) for q in QOS]

        def floor() -> int:
            n = 0
            for tier in tiers:
                with os.scandir(tier) as it:
                    for e in it:
                        if e.is_dir(follow_symlinks=False) and e.name.startswith("pod"):
                            with os.scandir(e.path) as inner:
                                n += sum(1 for c in inner if c.is_dir(follow_symlinks=False))
            return n

        agent_ms, floor_ms = alternate(informer.refresh, floor, rounds)
        assert len(informer.pods()) == N_PODS and floor() == N_PODS
    finally:
        if made is not None:
            made.cleanup()
        if tmp is not None:
            tmp.cleanup()
    return {"discovery_refresh_ms": agent_ms, "discovery_floor_ms": floor_ms, "discovery_tree": tree}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (well under 50 s)")
    args = parser.parse_args()
    # A SIGTERM (e.g. from `timeout`) must still run the cleanup of the cgroups we made.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rounds = 7 if args.quick else 25
    specs = pod_specs(N_PODS)
    k = bench_kubelet(specs, rounds)
    d = bench_discovery(specs, rounds)
    result: dict[str, object] = {
        "bench": NAME,
        "pods": N_PODS,
        "rounds": rounds,
        "kubelet_refresh_ms": round(k["kubelet_refresh_ms"], 2),
        "kubelet_per_pod_ms": round(k["kubelet_refresh_ms"] / N_PODS, 4),
        "kubelet_floor_ms": round(k["kubelet_floor_ms"], 2),
        "discovery_refresh_ms": round(float(d["discovery_refresh_ms"]), 2),
        "discovery_per_pod_ms": round(float(d["discovery_refresh_ms"]) / N_PODS, 4),
        "discovery_floor_ms": round(float(d["discovery_floor_ms"]), 2),
        "discovery_ratio": round(float(d["discovery_refresh_ms"]) / float(d["discovery_floor_ms"]), 2),
        "discovery_tree": d["discovery_tree"],
        "ratio": round(k["kubelet_refresh_ms"] / k["kubelet_floor_ms"], 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
