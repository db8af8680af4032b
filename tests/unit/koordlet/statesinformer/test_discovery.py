"""Standalone pod discovery on FakeHost trees (cgroupfs and systemd drivers) and PodList enrichment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordlet import api
from koordlet.statesinformer.discovery import CgroupDiscovery
from koordlet.statesinformer.pods import PodsInformer
from koordlet.system.host import Host
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeClock
from koordlet.testing.kubelet import pod_object

UID_G = "00000000-0000-4000-8000-000000000001"
UID_B = "00000000-0000-4000-8000-000000000002"
UID_BE = "00000000-0000-4000-8000-000000000003"
CID1, CID2 = "1" * 64, "2" * 64


def build(fake_host: Any, driver: CgroupDriver) -> Host:
    fake_host.pod_cgroup(UID_G, api.KubeQOSClass.GUARANTEED, driver)
    fake_host.container_cgroup(UID_B, f"containerd://{CID1}", api.KubeQOSClass.BURSTABLE, driver)
    fake_host.container_cgroup(UID_BE, f"containerd://{CID2}", api.KubeQOSClass.BESTEFFORT, driver)
    # strays that must be ignored: a non-pod dir and a pod-looking dir with a bad UID
    tier = fake_host.layout(driver).qos_dir(api.KubeQOSClass.BESTEFFORT)
    fake_host.mkcgroup(None, f"{tier}/not-a-pod")
    fake_host.mkcgroup(None, f"{tier}/pod..%2f..")
    return Host(fake_host.paths)


def informer(host: Host, pod_list: str = "") -> PodsInformer:
    inf = PodsInformer(CgroupDiscovery(host, pod_list), lambda: host.layout, clock=FakeClock(), staleness=20)
    assert inf.refresh()
    return inf


@pytest.mark.parametrize("driver", [CgroupDriver.CGROUPFS, CgroupDriver.SYSTEMD])
def test_discovery_both_drivers(fake_host: Any, driver: CgroupDriver) -> None:
    host = build(fake_host, driver)
    assert host.driver is driver
    by_uid = {p.uid: p for p in informer(host).pods()}
    assert set(by_uid) == {UID_G, UID_B, UID_BE}
    assert (by_uid[UID_G].qos, by_uid[UID_B].qos, by_uid[UID_BE].qos) == (
        api.QOSClass.LSR,
        api.QOSClass.LS,
        api.QOSClass.BE,
    )
    # No labels to read: the tier's class stands in for the label, so BE strategies can act standalone.
    assert by_uid[UID_BE].is_labelled_best_effort and by_uid[UID_G].qos_raw is api.QOSClass.LSR
    layout = host.layout
    for pod in by_uid.values():
        assert pod.cgroup_dir == layout.pod_dir(pod.uid, pod.kube_qos)
        assert fake_host.subsystem_dir("cpu").joinpath(pod.cgroup_dir).is_dir()
    be = by_uid[UID_BE]
    assert [c.container_id for c in be.containers] == [CID2]
    assert fake_host.subsystem_dir("cpu").joinpath(be.containers[0].cgroup_dir).is_dir()
    assert by_uid[UID_G].containers == ()


@pytest.mark.parametrize("driver", [CgroupDriver.CGROUPFS, CgroupDriver.SYSTEMD])
def test_a_pod_dir_with_a_trailing_newline_is_not_a_pod(fake_host: Any, driver: CgroupDriver) -> None:
    # Anyone who can mkdir in the BE tier once made a running LS pod show up twice, once as BE (which
    # switched BE suppression off), and made garbage ``pod<uuid>\n`` directories count as pods.
    host = build(fake_host, driver)
    be_tier = fake_host.layout(driver).qos_dir(api.KubeQOSClass.BESTEFFORT)
    name = fake_host.layout(driver).pod_dir_name(UID_B, api.KubeQOSClass.BESTEFFORT)
    fake_host.mkcgroup(None, f"{be_tier}/{name}\n")
    fake_host.mkcgroup(None, f"{be_tier}/{name.replace(UID_B[:8], 'f' * 8)}\n")
    pods = informer(host).pods()
    assert sorted(p.uid for p in pods) == sorted([UID_G, UID_B, UID_BE])
    assert next(p for p in pods if p.uid == UID_B).qos is api.QOSClass.LS


def test_discovery_cgroup_v2(fake_host: Any) -> None:
    fake_host.use_cgroup_v2()
    fake_host.container_cgroup(
        UID_BE, f"containerd://{CID2}", api.KubeQOSClass.BESTEFFORT, CgroupDriver.SYSTEMD
    )
    pods = informer(Host(fake_host.paths)).pods()
    assert [(p.uid, p.qos, len(p.containers)) for p in pods] == [(UID_BE, api.QOSClass.BE, 1)]


def test_discovery_under_a_cgroup_parent(fake_host: Any) -> None:
    fake_host.with_paths(cgroup_parent="/koordlet-test-x")
    fake_host.pod_cgroup(UID_B, api.KubeQOSClass.BURSTABLE)
    pods = informer(Host(fake_host.paths)).pods()
    assert [p.cgroup_dir for p in pods] == [f"koordlet-test-x/kubepods/burstable/pod{UID_B}"]


def test_pod_list_enrichment(fake_host: Any, tmp_path: Path) -> None:
    host = build(fake_host, CgroupDriver.CGROUPFS)
    listed = [
        pod_object(
            UID_B,
            "web-0",
            namespace="shop",
            qos_class="Guaranteed",  # wrong: the tier says Burstable, the tier wins
            labels={"koordinator.sh/priority-class": "koord-mid", "app": "web"},
            requests={"cpu": "500m", "memory": "1Gi"},
            limits={"cpu": "1", "memory": "2Gi"},
        ),
        pod_object("00000000-0000-4000-8000-0000000000ff", "elsewhere"),  # not on this node's tree
    ]
    listed[0]["metadata"]["annotations"] = {"note": "x"}
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"kind": "PodList", "items": listed}))
    by_uid = {p.uid: p for p in informer(host, str(path)).pods()}
    assert set(by_uid) == {UID_G, UID_B, UID_BE}
    web = by_uid[UID_B]
    assert (web.namespace, web.name, web.kube_qos, web.qos) == (
        "shop",
        "web-0",
        api.KubeQOSClass.BURSTABLE,
        api.QOSClass.LS,
    )
    assert web.priority_class is api.PriorityClass.MID
    assert web.labels["app"] == "web" and web.annotations == {"note": "x"}
    c = web.containers[0]
    assert (c.name, c.container_id, c.cpu_request_milli, c.memory_limit_bytes) == (
        "main",
        CID1,
        500,
        2 * 2**30,
    )
    assert c.cgroup_dir == f"kubepods/burstable/pod{UID_B}/{CID1}" and c.running
    assert web.phase == "Running"  # the list says nothing; the cgroup exists
    be = by_uid[UID_BE]
    assert be.name == UID_BE and be.namespace == ""  # unlisted: named by its UID
    assert [(c.name, c.container_id, c.runtime) for c in be.containers] == [(CID2[:12], CID2, "")]
    assert be.priority_class is api.PriorityClass.BATCH


def test_unreadable_pod_list_still_discovers(fake_host: Any, tmp_path: Path) -> None:
    host = build(fake_host, CgroupDriver.CGROUPFS)
    (tmp_path / "bad.json").write_text("{not json")
    assert len(informer(host, str(tmp_path / "bad.json")).pods()) == 3
    assert len(informer(host, str(tmp_path / "missing.json")).pods()) == 3


def test_discovery_believes_an_empty_tree_but_not_a_missing_one(fake_host: Any) -> None:
    host = build(fake_host, CgroupDriver.CGROUPFS)
    inf = informer(host)
    assert len(inf.pods()) == 3
    cpu = fake_host.paths.cgroup_root / "cpu"
    for uid, tier in ((UID_G, ""), (UID_B, "burstable/"), (UID_BE, "besteffort/")):
        pod_dir = cpu / f"kubepods/{tier}pod{uid}"
        for child in pod_dir.iterdir():
            child.rmdir()
        pod_dir.rmdir()
    assert inf.refresh() and inf.pods() == ()  # every pod gone: believed
    for d in sorted(cpu.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        d.rmdir()
    fake_host.container_cgroup(UID_B, f"containerd://{CID1}", api.KubeQOSClass.BURSTABLE)
    assert inf.refresh() and len(inf.pods()) == 1
    for d in sorted(cpu.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        d.rmdir()
    assert not inf.refresh() and len(inf.pods()) == 1  # kubepods vanished: kept, not believed


def test_a_host_without_any_kubepods_tree_is_synced_with_no_pods(fake_host: Any) -> None:
    host = Host(fake_host.paths)
    inf = informer(host)
    assert inf.refresh() and inf.pods() == ()


def test_a_change_the_pleg_names_lists_only_that_pod_dir(fake_host: Any) -> None:
    """Each PLEG event listed every tier and every pod dir again (a thousand pods' dirs per pod coming or
    going). Once the PLEG names the pod dirs that changed, a refresh lists just those; the pods it did not
    touch come back as the same objects, and ``None`` (events lost) or the safety interval list it all."""
    import shutil
    import threading
    import time

    from koordlet.statesinformer.pleg import PLEG
    from koordshared.runtime.lifecycle import wait_for

    driver = CgroupDriver.CGROUPFS
    uids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(10, 30)]
    for i, uid in enumerate(uids):
        fake_host.container_cgroup(uid, f"containerd://{i:064d}", api.KubeQOSClass.BURSTABLE, driver)
    fake_host.mkcgroup(None, "kubepods/besteffort")
    host = Host(fake_host.paths)
    clock = FakeClock()
    source = CgroupDiscovery(host, clock=clock)
    inf = PodsInformer(source, lambda: host.layout, clock=clock, staleness=20)
    refreshed: list[int] = []
    pleg = PLEG(host, lambda: refreshed.append(int(inf.refresh())), poll=0.05, on_dirs=source.changed)
    stop = threading.Event()
    t = threading.Thread(target=pleg.run, args=(stop,))
    t.start()
    try:
        assert wait_for(lambda: len(refreshed) == 1, threading.Event(), timeout=3)  # the first: everything
        assert len(inf.pods()) == 20
        before, listed, n = inf.pods(), source.dirs_listed, len(refreshed)
        cpu = fake_host.paths.cgroup_root / "cpu"
        new_uid = "00000000-0000-4000-8000-000000000099"
        (cpu / f"kubepods/besteffort/pod{new_uid}").mkdir()
        assert wait_for(lambda: any(p.uid == new_uid for p in inf.pods()), threading.Event(), timeout=3)
        (cpu / f"kubepods/besteffort/pod{new_uid}/{'a' * 64}").mkdir()
        assert wait_for(
            lambda: any(p.uid == new_uid and p.containers for p in inf.pods()), threading.Event(), timeout=3
        )
        # the new pod's dir, at most once per refresh (the old code: 3 tiers and 21 pod dirs each time)
        assert source.dirs_listed - listed <= len(refreshed) - n
        after = {p.uid: p for p in inf.pods()}
        assert all(after[p.uid] is p for p in before)  # untouched pods: the same objects
        # a pod removed (its container dir, then its own): gone, still without listing the others
        listed, n = source.dirs_listed, len(refreshed)
        shutil.rmtree(cpu / f"kubepods/burstable/pod{uids[0]}")
        assert wait_for(lambda: all(p.uid != uids[0] for p in inf.pods()), threading.Event(), timeout=3)
        time.sleep(0.2)
        assert source.dirs_listed - listed <= len(refreshed) - n
    finally:
        stop.set()
        pleg.close()
        t.join(5)
    # the safety interval: the next refresh lists the whole tree again
    listed = source.dirs_listed
    clock.advance(61.0)
    inf.refresh()
    assert source.dirs_listed - listed >= 21
