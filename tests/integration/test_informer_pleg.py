"""Real kernel: the PLEG sees kubelet-style pod and container cgroups appear and vanish in the v1 cpu
controller (inotify on cgroupfs), and the standalone informer refreshes long before its periodic sync.

Everything lives under a unique ``koordlet-test-<random>`` parent (the kubelet ``--cgroup-root``) and is
removed deepest first, even on failure.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.informer import StatesInformer
from koordlet.system.cgroups import CgroupMode, detect_mode
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver, CgroupLayout
from koordlet.testing.cgroups import RealCgroupTree
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.lifecycle import Supervisor, wait_for

NEVER = threading.Event()


@pytest.fixture
def tree() -> Iterator[RealCgroupTree]:
    if detect_mode(HostPaths()) is not CgroupMode.V1:
        pytest.skip("needs the v1 cpu controller")
    with RealCgroupTree(("cpu",)) as t:
        yield t


@pytest.mark.root
def test_pleg_on_real_cgroups(tree: RealCgroupTree) -> None:
    paths = HostPaths(cgroup_parent="/" + tree.parent)
    layout = CgroupLayout.create(CgroupDriver.CGROUPFS, paths.cgroup_parent)

    def mk(cgroup_dir: str) -> None:
        tree.mkdir(cgroup_dir.removeprefix(tree.parent + "/"))

    mk(layout.kubepods_dir())
    mk(layout.qos_dir(api.KubeQOSClass.BURSTABLE))
    mk(layout.qos_dir(api.KubeQOSClass.BESTEFFORT))
    cfg = InformerConfig(
        node_name="node-a",
        standalone=True,
        kubelet_sync_interval=60.0,  # only the PLEG can explain a refresh within the test
        enable_node_metric_report=False,
    )
    changes: list[float] = []
    bus = EventBus()
    bus.subscribe(api.EVENT_PODS_CHANGED, lambda: changes.append(time.monotonic()))
    informer = StatesInformer(cfg, Host(paths, mode=CgroupMode.V1), MetricCache(), bus)
    stop = threading.Event()
    sup = Supervisor(stop)
    informer.start(stop, sup)
    try:
        assert wait_for(informer.has_synced, NEVER, timeout=5)
        assert informer.pods() == ()
        uid = str(uuid.uuid4())
        cid = "f" * 64
        t0 = time.monotonic()
        mk(layout.pod_dir(uid, api.KubeQOSClass.BESTEFFORT))
        mk(layout.container_dir(uid, api.KubeQOSClass.BESTEFFORT, cid))
        assert wait_for(
            lambda: [c.container_id for p in informer.pods() for c in p.containers] == [cid], NEVER, timeout=5
        )
        assert time.monotonic() - t0 < 5.0
        pod = informer.pods()[0]
        assert (pod.uid, pod.qos, pod.cgroup_dir) == (
            uid,
            api.QOSClass.BE,
            layout.pod_dir(uid, api.KubeQOSClass.BESTEFFORT),
        )
        # kubelet removes the pod: container dir first, then the pod dir
        for cgroup_dir in (layout.container_dir(uid, api.KubeQOSClass.BESTEFFORT, cid), pod.cgroup_dir):
            tree.path("cpu", cgroup_dir.removeprefix(tree.parent + "/")).rmdir()
        t1 = time.monotonic()
        assert wait_for(lambda: informer.pods() == (), NEVER, timeout=5)  # the tree is the truth
        assert time.monotonic() - t1 < 5.0
        assert len(changes) >= 2
    finally:
        stop.set()
        informer.shutdown()
        assert sup.join(time.monotonic() + 5) == []
