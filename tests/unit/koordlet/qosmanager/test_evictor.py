"""The evictor: safety refusals, TTL cache, API path with 429 retry, kill path, dry run, audit, metrics."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.qosmanager.evictor import BLOCKED_RETRY, EVICTED_TTL, Evictor
from koordlet.resourceexecutor.audit import AuditLog
from koordlet.statesinformer.eviction import EvictResult
from koordlet.system.host import Host
from koordlet.testing import FakeClock

UID = "6a1f3c2e-1b2c-4d5e-8f90-0123456789ab"
CID = "a" * 64


def pod(qos: api.QOSClass = api.QOSClass.BE, **kw: Any) -> api.PodInfo:
    fields: dict[str, Any] = {
        "uid": UID,
        "namespace": "batch",
        "name": "be-0",
        "qos": qos,
        "kube_qos": api.KubeQOSClass.BESTEFFORT,
    }
    fields.update(kw)
    return api.PodInfo(**fields)


class FakeAPI:
    def __init__(self, answers: list[EvictResult]) -> None:
        self.answers = answers
        self.calls: list[str] = []
        self.events: list[tuple[str, ...]] = []

    def evict(self, p: api.PodInfo, reason: str, message: str) -> EvictResult:
        self.calls.append(p.uid)
        return self.answers.pop(0)

    def record_event(self, *args: str) -> None:
        self.events.append(args)


def make(fake_host: Any, clock: FakeClock, **kw: Any) -> tuple[Evictor, AuditLog, CollectorRegistry]:
    audit = AuditLog(100, wall_clock=clock.wall)
    reg = CollectorRegistry()
    ev = Evictor(node="n1", host=Host(fake_host.paths), audit=audit, clock=clock, registry=reg, **kw)
    return ev, audit, reg


@pytest.mark.parametrize(
    "victim",
    [
        pod(api.QOSClass.LS, kube_qos=api.KubeQOSClass.BURSTABLE),
        pod(api.QOSClass.LSR, kube_qos=api.KubeQOSClass.GUARANTEED),
        pod(api.QOSClass.SYSTEM),
        pod(owner_kind="DaemonSet"),
        pod(owner_kind="Node"),
        pod(api.QOSClass.LS, kube_qos=api.KubeQOSClass.BURSTABLE, labels={api.LABEL_EVICTION_ENABLED: "yes"}),
        pod(owner_kind="DaemonSet", labels={api.LABEL_EVICTION_ENABLED: "true"}),
    ],
)
def test_never_evicts_anything_but_plain_be_pods(
    fake_host: Any, fake_clock: FakeClock, victim: api.PodInfo
) -> None:
    fake_api = FakeAPI([EvictResult.EVICTED])
    ev, audit, reg = make(fake_host, fake_clock, only_by_api=True, eviction_api=fake_api)
    assert ev.evict(victim, "trigger by koordlet feature BEMemoryEvict", "m") is False
    assert fake_api.calls == [] and len(audit) == 0
    assert reg.get_sample_value("koordlet_pod_eviction_refused_total", {"node": "n1"}) == 1.0


def test_a_pod_opted_in_by_its_owner_may_be_evicted_whatever_its_qos(
    fake_host: Any, fake_clock: FakeClock
) -> None:
    """``koordinator.sh/eviction-enabled: "true"`` is the owner's consent the priority-based strategies
    (CPUEvict, MemoryEvict, the allocatable ones) need: such an LS pod is evicted, an unlabelled one not."""
    fake_api = FakeAPI([EvictResult.EVICTED])
    ev, audit, _reg = make(fake_host, fake_clock, only_by_api=True, eviction_api=fake_api)
    ls = pod(
        api.QOSClass.LS, kube_qos=api.KubeQOSClass.BURSTABLE, labels={api.LABEL_EVICTION_ENABLED: "true"}
    )
    assert ev.evict(ls, "trigger by koordlet feature MemoryEvict", "m") is True
    assert fake_api.calls == [ls.uid] and len(audit) == 1


def test_api_eviction_is_cached_audited_and_counted(fake_host: Any, fake_clock: FakeClock) -> None:
    fake_api = FakeAPI([EvictResult.EVICTED, EvictResult.EVICTED])
    ev, audit, reg = make(fake_host, fake_clock, only_by_api=True, eviction_api=fake_api)
    reason = "trigger by koordlet feature BEMemoryEvict"
    assert ev.evict(pod(), reason, "memory over threshold")
    assert ev.evict(pod(), reason, "again")  # cached: no second API call
    assert fake_api.calls == [UID]
    assert reg.get_sample_value("koordlet_pod_eviction_total", {"node": "n1", "reason": reason}) == 1.0
    [event] = audit.events()
    assert event["path"] == "batch/be-0" and event["after"] == "evicted" and event["before"] == UID
    assert fake_api.events == []  # the API side records its own Event for an API eviction
    fake_clock.advance(EVICTED_TTL + 1)
    assert not ev.recently_evicted(UID)
    assert ev.evict(pod(), reason, "after ttl")
    assert fake_api.calls == [UID, UID]


def test_blocked_eviction_is_retried_only_after_backoff(fake_host: Any, fake_clock: FakeClock) -> None:
    fake_api = FakeAPI([EvictResult.BLOCKED, EvictResult.EVICTED])
    ev, _, _ = make(fake_host, fake_clock, only_by_api=True, eviction_api=fake_api)
    assert not ev.evict(pod(), "r", "m")
    assert not ev.evict(pod(), "r", "m")  # within the back-off: no call
    assert fake_api.calls == [UID]
    fake_clock.advance(BLOCKED_RETRY + 0.1)
    assert ev.evict(pod(), "r", "m")
    assert fake_api.calls == [UID, UID]


def test_kill_path_signals_every_process_of_the_pod_tree(fake_host: Any, fake_clock: FakeClock) -> None:
    pod_dir = fake_host.pod_cgroup(UID)
    cdir = fake_host.container_cgroup(UID, CID)
    fake_host.write_cgroup("cgroup.procs", pod_dir, "")
    fake_host.write_cgroup("cgroup.procs", cdir, "101\n102\n")
    killed: list[tuple[int, int]] = []
    ev, audit, _ = make(fake_host, fake_clock, kill=lambda pid, sig: killed.append((pid, sig)))
    assert ev.evict(pod(cgroup_dir=pod_dir), "r", "m")
    assert sorted(p for p, _ in killed) == [101, 102] and {s for _, s in killed} == {9}
    assert audit.events()[0]["after"] == "killed 2 process(es)"


def test_kill_path_in_a_cluster_emits_an_event(fake_host: Any, fake_clock: FakeClock) -> None:
    fake_api = FakeAPI([])
    killed: list[int] = []
    ev, _, _ = make(fake_host, fake_clock, eviction_api=fake_api, kill=lambda pid, sig: killed.append(pid))
    pod_dir = fake_host.pod_cgroup(UID)
    fake_host.write_cgroup("cgroup.procs", pod_dir, "7\n")
    broken = fake_host.container_cgroup(UID, CID)  # no cgroup.procs file: skipped, not fatal
    assert broken.startswith(pod_dir)
    assert ev.evict(pod(cgroup_dir=pod_dir), "r", "m")
    assert killed == [7]
    assert fake_api.calls == [] and fake_api.events[0][4:6] == ("Warning", "evictPodSuccess")


def test_dry_run_decides_but_does_not_act(fake_host: Any, fake_clock: FakeClock) -> None:
    fake_api = FakeAPI([EvictResult.EVICTED])
    ev, audit, _ = make(fake_host, fake_clock, only_by_api=True, eviction_api=fake_api, dry_run=True)
    assert ev.evict(pod(), "r", "m") is False
    assert fake_api.calls == [] and audit.events()[0]["after"] == "dry-run"


def test_only_by_api_needs_an_api(fake_host: Any, fake_clock: FakeClock) -> None:
    with pytest.raises(ValueError, match="only-evict-by-api"):
        make(fake_host, fake_clock, only_by_api=True)
