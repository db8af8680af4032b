"""F12 on this hybrid host: one busy process sits in a v1 container cgroup and in a cgroup of the same name
in the (controller-less) cgroup2 hierarchy; the v1 collector (``cpuacct.usage``) and the v2 collector
(``cpu.stat usage_usec``) report the same CPU within 5 %, and the v2 side also yields pod PSI from the
cgroup pressure files that v1 lacks here.

The v1 tree comes from ``koordlet.testing.cgroups.RealKubepods``; the mirrored v2 dirs are created under
the same unique parent and removed (deepest first, after the processes are killed) even when the test fails.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from koordlet import api
from koordlet.api.metrics import POD_PSI
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.podresource import PodResourceCollector, PodResourceConfig
from koordlet.metricsadvisor.psi import PSICollector, PSIConfig
from koordlet.system.cgroups import CgroupMode
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeStates
from koordlet.testing.cgroups import RealCgroupTree, RealKubepods
from tests.support.recording import RecordingErrors

UNIFIED = HostPaths().cgroup_root / "unified"

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(not (UNIFIED / "cgroup.procs").exists(), reason="no hybrid cgroup2 mount"),
]


@pytest.fixture
def kubepods() -> Iterator[tuple[RealKubepods, RealCgroupTree]]:
    """The v1 kubepods tree, and the same parent in the hybrid host's cgroup2 mount."""
    kp = RealKubepods()
    unified = RealCgroupTree(("",), root=UNIFIED, parent=kp.parent)
    try:
        yield kp, unified
    finally:
        kp.cleanup()  # kills the processes first, so the v2 dirs are empty
        unified.cleanup()


def test_v1_and_v2_counters_agree_and_v2_gives_pod_psi(kubepods: tuple[RealKubepods, RealCgroupTree]) -> None:
    kp, unified = kubepods
    pod = kp.add_pod(api.KubeQOSClass.BESTEFFORT)
    container = kp.add_container(pod)
    rel = container.cgroup_dir.removeprefix(kp.parent + "/")
    unified.mkdir(rel)
    v2_container = unified.path("", rel)
    proc = kp.busy(container, duty=0.5)
    fd = os.open(v2_container / "cgroup.procs", os.O_WRONLY)
    try:
        assert os.write(fd, str(proc.pid).encode()) == len(str(proc.pid))
    finally:
        os.close(fd)
    states = FakeStates(pods=[pod.info()])
    v1_cache, v2_cache = MetricCache(), MetricCache()
    v1_errors, v2_errors = RecordingErrors(), RecordingErrors()
    v1_host = Host(HostPaths(cgroup_parent=kp.parent), CgroupMode.V1, CgroupDriver.CGROUPFS)
    v2_host = Host(
        HostPaths(cgroup_root=UNIFIED, cgroup_parent=kp.parent), CgroupMode.V2, CgroupDriver.CGROUPFS
    )
    v1 = PodResourceCollector(
        PodResourceConfig(1.0),
        fw.Options(
            cache=v1_cache,
            clock=time.monotonic,
            errors=v1_errors,
            host=v1_host,
            states=states,
            shared=fw.SharedState(),
        ),
    )
    v2 = PodResourceCollector(
        PodResourceConfig(1.0),
        fw.Options(
            cache=v2_cache,
            clock=time.monotonic,
            errors=v2_errors,
            host=v2_host,
            states=states,
            shared=fw.SharedState(),
        ),
    )
    psi = PSICollector(
        PSIConfig(10.0),
        fw.Options(cache=v2_cache, clock=time.monotonic, errors=v2_errors, host=v2_host, states=states),
    )
    try:
        v1.collect()
        v2.collect()
        time.sleep(2.0)
        v1.collect()
        v2.collect()
        psi.collect()
    finally:
        v1.close()
        v2.close()
        psi.close()
    cpu1 = {lbl["container_id"]: v for lbl, _t, v in v1_cache.latest(api.CONTAINER_CPU_USAGE)}
    cpu2 = {lbl["container_id"]: v for lbl, _t, v in v2_cache.latest(api.CONTAINER_CPU_USAGE)}
    assert cpu1[container.container_id] > 0.05
    assert cpu2[container.container_id] == pytest.approx(cpu1[container.container_id], rel=0.05)
    # no memory controller in this cgroup2 tree: memory is skipped (counted), never reported as zero
    assert v2_cache.latest(api.CONTAINER_MEMORY_USAGE) == []
    assert v2_errors.kind(fw.ERR_FILE_MISSING) > 0
    assert v2_errors.kind(fw.ERR_GONE) == 0
    resources = {lbl["psi_resource"] for lbl, _t, _v in v2_cache.latest(POD_PSI) if lbl["pod_uid"] == pod.uid}
    assert resources == {"cpu", "mem", "io"}
