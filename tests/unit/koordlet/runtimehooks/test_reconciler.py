"""The reconciler: which pods a pass touches and what it writes, on the plugin kit's fakes and on the
agent's real executor over a throw-away cgroup tree (v1 and v2 files as the kernel shows them)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.runtimehooks.batchresource import BatchResource
from koordlet.runtimehooks.config import HooksConfig
from koordlet.runtimehooks.cpuset import CPUSetAllocator
from koordlet.runtimehooks.protocol import Rule
from koordlet.runtimehooks.reconciler import Reconciler
from koordlet.runtimehooks.service import RuntimeHooks
from koordlet.system.host import Host
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeExecutor, FakeHostReader, FakeStates, be_slo, make_pod, topology, wait_until
from koordlet.testing.wakeups import voluntary_switches
from koordshared.apis.topology import noderesourcetopology as nrt
from tests.support.fakehost import FakeHost

GiB = 1 << 30
STATUS = "scheduling.koordinator.sh/resource-status"
CPUS = topology(cores=4)
POOLS = nrt.pools_from_cpus(nrt.CPUDetail(c.cpu, c.core, c.socket, c.node) for c in CPUS)


def be_pod(name: str = "batch") -> api.PodInfo:
    pod = make_pod(name)
    c = dataclasses.replace(
        pod.containers[0],
        batch_cpu_request_milli=1500,
        batch_cpu_limit_milli=3000,
        batch_memory_request_bytes=GiB,
        batch_memory_limit_bytes=GiB,
    )
    return dataclasses.replace(pod, containers=(c,))


def fake_world(*pods: api.PodInfo) -> tuple[FakeStates, FakeHostReader, FakeExecutor]:
    host = FakeHostReader(1, CPUS)
    host.supported |= {"cpu.shares", "memory.limit_in_bytes"}
    for p in pods:
        host.add_cgroup(p.cgroup_dir, cpu_cfs_quota_us="-1", cpu_shares="2")
        for c in p.containers:
            host.add_cgroup(c.cgroup_dir, cpu_cfs_quota_us="-1", cpu_shares="2", cpuset_cpus="0-3")
    return FakeStates(pods=pods), host, FakeExecutor(host)


def reconciler(
    states: FakeStates, host: api.HostReader, writer: api.ResourceWriter, rule: Rule
) -> Reconciler:
    return Reconciler((CPUSetAllocator(), BatchResource()), states, host, writer, lambda: rule)


def test_a_new_be_pod_gets_its_batch_limits_once() -> None:
    pod = be_pod()
    states, host, ex = fake_world(pod)
    r = reconciler(states, host, ex, Rule(share_pools=POOLS))
    report = r.reconcile(full=False)
    c = pod.containers[0].cgroup_dir
    for d in (pod.cgroup_dir, c):
        assert host.read("cpu.shares", d) == "1536"
        assert host.read("cpu.cfs_quota_us", d) == "300000"
        assert host.read("memory.limit_in_bytes", d) == str(GiB)
    assert report.errors == 0 and report.written == 6
    assert host.read("cpuset.cpus", c) == "0-3"  # BE containers' cpusets are BECPUSuppress's
    before = len(ex.leveled)
    assert r.reconcile(full=False).pods == 0  # nothing changed: nothing asked, nothing written
    assert len(ex.leveled) == before


def test_pods_not_listed_are_never_touched() -> None:
    ours, stranger = be_pod("ours"), be_pod("stranger")
    states, host, ex = fake_world(ours, stranger)
    states.pod_list = [ours]  # the stranger's cgroup dirs exist, but it is not a pod of this node
    done = dataclasses.replace(be_pod("done"), phase="Succeeded")
    states.pod_list.append(done)
    reconciler(states, host, ex, Rule(share_pools=POOLS)).reconcile()
    touched = {u.cgroup_dir for u in ex.updates}
    for pod in (stranger, done):
        assert pod.cgroup_dir not in touched
        assert not any(d.startswith(pod.cgroup_dir) for d in touched)
    assert ours.cgroup_dir in touched


def test_rule_change_re_asks_every_pod() -> None:
    pod = be_pod()
    states, host, ex = fake_world(pod)
    rule = Rule(share_pools=POOLS)
    r = Reconciler((BatchResource(),), states, host, ex, lambda: rule)
    r.reconcile(full=False)
    rule = Rule(share_pools=POOLS, slo=be_slo(cpu_suppress_policy="cfsQuota"))
    report = r.reconcile(full=False)
    assert report.full and host.read("cpu.cfs_quota_us", pod.cgroup_dir) == "-1"
    assert host.read("cpu.cfs_quota_us", pod.containers[0].cgroup_dir) == "-1"


def test_an_unwritable_pod_is_retried_on_the_next_pass() -> None:
    pod = be_pod()
    states, host, ex = fake_world(pod)
    host.remove_cgroup(pod.containers[0].cgroup_dir)  # listed, but the runtime has not made it yet
    r = reconciler(states, host, ex, Rule(share_pools=POOLS))
    r.reconcile(full=False)
    host.add_cgroup(pod.containers[0].cgroup_dir, cpu_shares="2")
    assert r.reconcile(full=False).pods == 1
    assert host.read("cpu.shares", pod.containers[0].cgroup_dir) == "1536"


def test_lsr_and_ls_pods_through_the_service() -> None:
    lsr = make_pod("lsr", api.QOSClass.LSR, annotations={STATUS: '{"cpuset":"1"}'})
    ls = make_pod("ls", api.QOSClass.LS)
    states, host, ex = fake_world(lsr, ls)
    host.add_cgroup(lsr.cgroup_dir, cpu_cfs_quota_us="200000")
    host.add_cgroup(lsr.containers[0].cgroup_dir, cpu_cfs_quota_us="200000", cpuset_cpus="0-3")
    pools = tuple(p if p.node != 0 else nrt.CPUSharedPool(0, 0, "0,2-3") for p in POOLS)
    status = nrt_status(pools)
    hooks = RuntimeHooks(
        HooksConfig(enabled=frozenset({"CPUSetAllocator", "BatchResource"})), states, host, ex, lambda: status
    )
    hooks.reconciler.reconcile()
    assert host.read("cpuset.cpus", lsr.containers[0].cgroup_dir) == "1"
    assert host.read("cpu.cfs_quota_us", lsr.containers[0].cgroup_dir) == "-1"
    assert host.read("cpu.cfs_quota_us", lsr.cgroup_dir) == "-1"
    assert host.read("cpuset.cpus", ls.containers[0].cgroup_dir) == "0,2-3"


def nrt_status(pools: tuple[nrt.CPUSharedPool, ...]) -> nrt.NodeTopologyStatus:
    return nrt.NodeTopologyStatus(
        (), annotations={nrt.ANNOTATION_CPU_SHARED_POOLS: nrt.share_pools_json(pools)}
    )


@pytest.mark.parametrize("version", [1, 2])
def test_the_real_executor_writes_the_kernel_files(tmp_path: Path, version: int) -> None:
    fake = FakeHost(tmp_path)
    if version == 2:
        fake.use_cgroup_v2()
    pod = be_pod()
    layout = fake.layout()
    pod_dir = layout.pod_dir(pod.uid, api.KubeQOSClass.BESTEFFORT)
    c_dir = f"{pod_dir}/{pod.containers[0].container_id}"
    pod = dataclasses.replace(
        pod, cgroup_dir=pod_dir, containers=(dataclasses.replace(pod.containers[0], cgroup_dir=c_dir),)
    )
    for d in (pod_dir, c_dir):
        fake.mkcgroup(None, d)
        if version == 1:
            for res, v in (
                ("cpu.cfs_quota_us", "-1"),
                ("cpu.shares", "2"),
                ("memory.limit_in_bytes", "9223372036854771712"),
            ):
                fake.write_cgroup(res, d, v)
        else:
            for res, v in (
                ("cpu.cfs_quota_us", "max 100000"),
                ("cpu.shares", "1"),
                ("memory.limit_in_bytes", "max"),
            ):
                fake.write_cgroup(res, d, v)
    host = Host(fake.paths, mode=fake.mode, driver=CgroupDriver.CGROUPFS)
    ex = ResourceExecutor(fake.paths, registry=CollectorRegistry(), mode=fake.mode)
    r = Reconciler((BatchResource(),), FakeStates(pods=[pod]), host, ex, Rule)
    assert r.reconcile().errors == 0
    for d in (pod_dir, c_dir):
        if version == 1:
            assert fake.read_cgroup("cpu.shares", d) == "1536"
            assert fake.read_cgroup("cpu.cfs_quota_us", d) == "300000"
            assert fake.read_cgroup("memory.limit_in_bytes", d) == str(GiB)
        else:
            assert fake.read_cgroup("cpu.shares", d) == "59"  # cpu.weight = 1 + (1536 - 2) * 9999 / 262142
            assert fake.read_cgroup("cpu.cfs_quota_us", d) == "300000 100000"  # cpu.max
            assert fake.read_cgroup("memory.limit_in_bytes", d) == str(GiB)  # memory.max
    # the same values again: nothing is written, on v2 too (cpu.weight reads back as other shares)
    assert r.reconcile(verify={pod.uid}).written == 0
    # changed by hand: a pass trusting the cache misses it, a verifying pass restores it
    fake.write_cgroup("cpu.shares", c_dir, "2" if version == 1 else "1")
    assert r.reconcile(full=False).written == 0
    assert r.reconcile(full=False, verify={pod.uid}).written == 1
    assert fake.read_cgroup("cpu.shares", c_dir) == ("1536" if version == 1 else "59")
    assert ex.events()[-1]["owner"] == "BatchResource"


def test_the_sandbox_gets_the_cpuset_and_nothing_else_is_guessed() -> None:
    lsr = make_pod("lsr", api.QOSClass.LSR, annotations={STATUS: '{"cpuset":"1"}'})
    states, host, ex = fake_world(lsr)
    sandbox = f"{lsr.cgroup_dir}/{'a' * 64}"
    stray = f"{lsr.cgroup_dir}/not-a-container"
    host.add_cgroup(sandbox, cpuset_cpus="0-3", cpu_cfs_quota_us="-1")
    host.add_cgroup(stray, cpuset_cpus="0-3")
    r = reconciler(states, host, ex, Rule(share_pools=POOLS))
    r.reconcile()
    assert host.read("cpuset.cpus", sandbox) == "1"
    assert host.read("cpuset.cpus", stray) == "0-3"
    # a second unnamed container dir (a container the pod list does not name yet): the sandbox found
    # while it was the only one stays the sandbox, the newcomer is not guessed at
    other = f"{lsr.cgroup_dir}/{'b' * 64}"
    host.add_cgroup(other, cpuset_cpus="0-3")
    host.add_cgroup(sandbox, cpuset_cpus="0-3")
    r.reconcile()
    assert host.read("cpuset.cpus", sandbox) == "1" and host.read("cpuset.cpus", other) == "0-3"
    # met for the first time with two unnamed dirs, which one is the sandbox is not known: neither is touched
    host.add_cgroup(sandbox, cpuset_cpus="0-3")
    fresh = reconciler(states, host, ex, Rule(share_pools=POOLS))
    fresh.reconcile()
    assert host.read("cpuset.cpus", sandbox) == "0-3" and host.read("cpuset.cpus", other) == "0-3"


def test_a_pod_dir_is_listed_again_only_when_its_containers_change() -> None:
    lsr = make_pod("lsr", api.QOSClass.LSR, annotations={STATUS: '{"cpuset":"1"}'})
    states, host, ex = fake_world(lsr)
    host.add_cgroup(f"{lsr.cgroup_dir}/{'a' * 64}", cpuset_cpus="0-3")
    listed: list[str] = []
    real = host.list_cgroups

    def counting(cgroup_dir: str, depth: int) -> Sequence[str]:
        listed.append(cgroup_dir)
        return real(cgroup_dir, depth)

    host.list_cgroups = counting  # type: ignore[method-assign]
    r = reconciler(states, host, ex, Rule(share_pools=POOLS))
    r.reconcile()
    r.reconcile()
    assert listed == [lsr.cgroup_dir]  # the second full pass knew the sandbox
    # the kubelet made a new sandbox with new containers: the pod's containers changed, so look again
    c = lsr.containers[0]
    renewed = dataclasses.replace(c, container_id="c" * 64, cgroup_dir=f"{lsr.cgroup_dir}/{'c' * 64}")
    host.remove_cgroup(f"{lsr.cgroup_dir}/{'a' * 64}")
    host.remove_cgroup(c.cgroup_dir)
    host.add_cgroup(renewed.cgroup_dir, cpuset_cpus="0-3")
    host.add_cgroup(f"{lsr.cgroup_dir}/{'d' * 64}", cpuset_cpus="0-3")
    states.pod_list = [dataclasses.replace(lsr, containers=(renewed,))]
    r.reconcile()
    assert listed == [lsr.cgroup_dir] * 2
    assert host.read("cpuset.cpus", f"{lsr.cgroup_dir}/{'d' * 64}") == "1"  # the new sandbox


def test_a_container_the_list_does_not_name_yet_asks_for_the_list_again() -> None:
    pod = be_pod()
    c = pod.containers[0]
    unnamed = dataclasses.replace(pod, containers=(dataclasses.replace(c, container_id="", cgroup_dir=""),))
    states, host, ex = fake_world(pod)
    host.add_cgroup(f"{pod.cgroup_dir}/{'f' * 64}")  # the sandbox
    states.pod_list = [unnamed]  # the runtime made the container; the kubelet does not report it yet
    asked: list[float] = []

    def refresh() -> None:
        asked.append(1)
        if len(asked) >= 2:
            states.pod_list = [pod]  # the kubelet's next answer names it
            r.pods_changed()

    r = Reconciler((BatchResource(),), states, host, ex, Rule, refresh=refresh, interval=3600)
    stop = threading.Event()
    t = threading.Thread(target=r.run, args=(stop,))
    t.start()
    try:
        assert wait_until(lambda: host.read("cpu.shares", c.cgroup_dir) == "1536", 10)
        assert len(asked) >= 2 and r.unsettled == 0
    finally:
        stop.set()
        r.shutdown()
        t.join(5)


def test_the_loop_sleeps_between_passes_and_wakes_on_request_and_shutdown() -> None:
    # It woke every second only to look at stop.
    pod = be_pod()
    states, host, ex = fake_world(pod)
    r = reconciler(states, host, ex, Rule())
    stop = threading.Event()
    thread = threading.Thread(target=r.run, args=(stop,), name="reconciler")
    thread.start()
    try:
        assert wait_until(lambda: r.passes == 1, 5)  # the first full pass at once
        before = voluntary_switches(thread)
        time.sleep(1.5)  # the measurement window: the next full pass is 10 s away
        assert voluntary_switches(thread) - before <= 1 and r.passes == 1
        r.request(verify={pod.uid})
        assert wait_until(lambda: r.passes == 2, 5)
    finally:
        stop.set()
        r.shutdown()
        thread.join(5)
    assert not thread.is_alive()


def test_a_timed_pass_asks_only_the_pods_the_guard_cannot_see() -> None:
    """Every timed pass asked every hook about every pod (a thousand pods every ten seconds) although the
    guard sees any write to the pods' values as it happens. A timed pass now asks the pods whose inputs
    changed and those the guard does not watch; every :data:`FULL_EVERY`-th still asks them all."""
    from koordlet.runtimehooks import reconciler as rmod

    pods = [be_pod(f"batch-{i}") for i in range(10)]
    states, host, ex = fake_world(*pods)
    watched: set[str] = set()
    asked: list[str] = []
    r = Reconciler(
        (BatchResource(),),
        states,
        host,
        ex,
        Rule,
        interval=0.02,
        guarded=lambda: frozenset(watched),
        on_hook=lambda name, stage, took, ok: asked.append(stage.value),
    )
    stop = threading.Event()
    thread = threading.Thread(target=r.run, args=(stop,), name="reconciler")
    thread.start()
    try:
        assert wait_until(lambda: r.passes >= 1, 5)
        watched.update(p.uid for p in pods[:8])  # the guard watches all but two pods
        first = r.passes
        assert wait_until(lambda: r.passes >= first + 5, 5)
        asked.clear()
        n0 = r.passes
        assert wait_until(lambda: r.passes >= n0 + 5, 5)
        passes, per_pod = r.passes - n0, len([a for a in asked if a == "PreRunPodSandbox"])
    finally:
        stop.set()
        r.shutdown()
        thread.join(5)
    # each timed pass: the 3 tiers and the 2 unwatched pods (a full one now and then: all 10)
    fulls = passes // rmod.FULL_EVERY + 1
    assert per_pod <= passes * (3 + 2) + fulls * 10
    assert 0 < per_pod < passes * (3 + 10)
