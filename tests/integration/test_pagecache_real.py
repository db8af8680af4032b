"""Page cache on the real kernel: a process in a BE container of a kubelet-like tree writes a file; the
agent's collectors count that page cache into the ``*_with_page_cache`` series and not into koordlet's
usage, and the NodeMetric status reports the pod with or without it as its memory collect policy says."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from koordlet import api
from koordlet.api.metrics import CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE, POD_MEMORY_USAGE_WITH_PAGE_CACHE
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.noderesource import NodeResourceCollector, NodeResourceConfig
from koordlet.metricsadvisor.podresource import PodResourceCollector, PodResourceConfig
from koordlet.statesinformer.nodemetric import StatusBuilder
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeClock, FakeStates, wait_until
from koordlet.testing.cgroups import RealKubepods
from koordshared.apis.meta.quantity import to_int
from koordshared.apis.slo.nodemetric import CollectPolicy
from tests.support.recording import RecordingErrors

pytestmark = [pytest.mark.root, pytest.mark.tool("dd")]

MIB = 1 << 20
WRITER = "import sys; open(sys.argv[1], 'wb').write(b'x' * (32 << 20)); print('done', flush=True)"


def test_page_cache_counted_apart_and_reported_by_policy(tmp_path: Path, kubepods: RealKubepods) -> None:
    if not kubepods.path("memory", kubepods.kubepods, "memory.stat").exists():
        pytest.skip("needs the v1 memory controller")
    pod = kubepods.add_pod(api.KubeQOSClass.BESTEFFORT)
    c = kubepods.add_container(pod)
    target = tmp_path / "cached.bin"
    try:
        writer = kubepods.spawn(c, WRITER, str(target))
        assert writer.stdout is not None and writer.stdout.readline().strip() == b"done"
        writer.wait(30)
        host = Host(
            dataclasses.replace(HostPaths(), cgroup_parent=f"/{kubepods.parent}"),
            driver=CgroupDriver.CGROUPFS,
        )
        info = pod.info()
        clock = FakeClock()
        cache = MetricCache(clock=clock, wall_clock=clock.wall)
        errors = RecordingErrors()
        shared = fw.SharedState()
        pods = PodResourceCollector(
            PodResourceConfig(1.0, with_page_cache=True),
            fw.Options(
                cache=cache,
                clock=clock,
                errors=errors,
                host=host,
                states=FakeStates(pods=[info]),
                shared=shared,
            ),
        )
        node = NodeResourceCollector(
            NodeResourceConfig(1.0, with_page_cache=True),
            fw.Options(cache=cache, clock=clock, errors=errors, paths=host.paths, shared=shared),
        )

        def sweep() -> None:
            pods.collect()
            node.collect()
            clock.advance(1)

        for _ in range(3):
            sweep()
        labels = {"container_id": c.container_id}
        plain = cache.query(api.CONTAINER_MEMORY_USAGE, window=5, labels=labels)
        cached = cache.query(CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE, window=5, labels=labels)
        assert plain is not None and cached is not None
        # the 32 MiB written are file pages of the container, charged to it, left out of koordlet's usage
        assert 28 * MIB <= cached.value - plain.value <= 40 * MIB, (plain, cached)

        def pod_cached() -> float:
            got = cache.query(POD_MEMORY_USAGE_WITH_PAGE_CACHE, window=1, labels={"pod_uid": pod.uid})
            return 0.0 if got is None else got.value

        def swept_pod_cached() -> bool:
            sweep()
            return pod_cached() >= 28 * MIB

        # the pod's hierarchical totals are flushed by the kernel lazily (every ~2 s): sweep until they are
        assert wait_until(swept_pod_cached, 10, step=0.5), pod_cached()
        builder = StatusBuilder(cache, clock.wall)

        def pod_memory(policy: str) -> int:
            status = builder.build(CollectPolicy(memory_policy=policy), [info])
            (entry,) = status["podsMetric"]
            return to_int(entry["podUsage"]["resources"]["memory"])

        def reported_cache() -> int:
            return pod_memory("usageWithPageCache") - pod_memory("usageWithoutPageCache")

        def swept_reported() -> bool:
            sweep()
            return reported_cache() >= 28 * MIB

        # The report averages the pod over its window, which still holds sweeps from before the kernel
        # flushed the pod's totals (a suite run read 25.2 MiB): sweep on until the average has the cache.
        assert wait_until(swept_reported, 30, step=0.2), reported_cache()
        without, with_cache = pod_memory("usageWithoutPageCache"), pod_memory("usageWithPageCache")
        assert with_cache - without >= 28 * MIB, (without, with_cache)
        node_without = to_int(
            builder.build(CollectPolicy(), [])["nodeMetric"]["nodeUsage"]["resources"]["memory"]
        )
        node_with = to_int(
            builder.build(CollectPolicy(memory_policy="usageWithPageCache"), [])["nodeMetric"]["nodeUsage"][
                "resources"
            ]["memory"]
        )
        assert node_with > node_without  # MemTotal - MemFree counts the cache MemAvailable leaves out
    finally:
        target.unlink(missing_ok=True)  # the page cache goes with the file; the tree with the fixture
