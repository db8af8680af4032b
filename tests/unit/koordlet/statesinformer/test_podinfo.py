"""PodInfo from pod JSON: QoS and priority derivation tables, resources, container IDs, unsafe IDs."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from koordlet import api
from koordlet.statesinformer import podinfo
from koordlet.system.podpath import CgroupDriver, CgroupLayout
from koordshared.apis.core import pod as podschema
from koordshared.apis.extension import qos as qosapi

UID = "0f5e6a2c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"
CID = "a" * 64
CGROUPFS = CgroupLayout.create(CgroupDriver.CGROUPFS)
SYSTEMD = CgroupLayout.create(CgroupDriver.SYSTEMD)


def res(cpu: str | None = None, mem: str | None = None, **extra: str) -> dict[str, str]:
    out = dict(extra)
    if cpu is not None:
        out["cpu"] = cpu
    if mem is not None:
        out["memory"] = mem
    return out


def pod(
    *,
    uid: str = UID,
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    qos_class: str | None = None,
    container_id: str | None = f"containerd://{CID}",
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "resources": {}}
    if requests is not None:
        container["resources"]["requests"] = requests
    if limits is not None:
        container["resources"]["limits"] = limits
    spec: dict[str, Any] = {"containers": [container], "nodeName": "n1"}
    if priority is not None:
        spec["priority"] = priority
    status: dict[str, Any] = {"phase": "Running"}
    if qos_class is not None:
        status["qosClass"] = qos_class
    if container_id is not None:
        status["containerStatuses"] = [{"name": "app", "containerID": container_id, "state": {"running": {}}}]
    return {
        "metadata": {"uid": uid, "name": "p", "namespace": "ns", "labels": labels or {}},
        "spec": spec,
        "status": status,
    }


@pytest.mark.parametrize(
    ("requests", "limits", "kube"),
    [
        (None, None, api.KubeQOSClass.BESTEFFORT),
        (res("1", "1Gi"), res("1", "1Gi"), api.KubeQOSClass.GUARANTEED),
        (None, res("1", "1Gi"), api.KubeQOSClass.GUARANTEED),  # requests default to limits
        (res("500m", "1Gi"), res("1", "1Gi"), api.KubeQOSClass.BURSTABLE),
        (
            res("1000m", "1024Mi"),
            res("1", "1Gi"),
            api.KubeQOSClass.GUARANTEED,
        ),  # equal quantities, other spelling
        (res("1"), None, api.KubeQOSClass.BURSTABLE),
        (None, res("1"), api.KubeQOSClass.BURSTABLE),  # memory limit missing
    ],
)
def test_kube_qos_computed_without_status(
    requests: dict[str, str] | None, limits: dict[str, str] | None, kube: api.KubeQOSClass
) -> None:
    assert podschema.kube_qos_of(pod(requests=requests, limits=limits)) is kube


def test_status_qos_class_wins_over_computation() -> None:
    assert podschema.kube_qos_of(pod(qos_class="Burstable")) is api.KubeQOSClass.BURSTABLE
    # garbage in status falls back to the computation
    assert podschema.kube_qos_of(pod(qos_class="Gold")) is api.KubeQOSClass.BESTEFFORT


@pytest.mark.parametrize(
    ("label", "kube", "qos"),
    [
        ("", api.KubeQOSClass.GUARANTEED, api.QOSClass.LSR),
        ("", api.KubeQOSClass.BURSTABLE, api.QOSClass.LS),
        ("", api.KubeQOSClass.BESTEFFORT, api.QOSClass.BE),
        ("BE", api.KubeQOSClass.GUARANTEED, api.QOSClass.BE),
        ("LSE", api.KubeQOSClass.BESTEFFORT, api.QOSClass.LSE),
        ("SYSTEM", api.KubeQOSClass.BURSTABLE, api.QOSClass.SYSTEM),
        ("be", api.KubeQOSClass.BURSTABLE, api.QOSClass.LS),  # names are exact; unknown -> default
    ],
)
def test_qos_table(label: str, kube: api.KubeQOSClass, qos: api.QOSClass) -> None:
    labels = {qosapi.LABEL_QOS: label} if label else {}
    assert qosapi.qos_of(labels, kube) is qos


@pytest.mark.parametrize(
    ("label", "priority", "qos", "expected"),
    [
        ("koord-mid", 9500, api.QOSClass.LS, api.PriorityClass.MID),
        (None, 9000, api.QOSClass.BE, api.PriorityClass.PROD),
        (None, 9999, api.QOSClass.BE, api.PriorityClass.PROD),
        (None, 7500, api.QOSClass.LS, api.PriorityClass.MID),
        (None, 5000, api.QOSClass.LS, api.PriorityClass.BATCH),
        (None, 3999, api.QOSClass.LS, api.PriorityClass.FREE),
        (None, 8500, api.QOSClass.BE, api.PriorityClass.BATCH),  # between bands -> from QoS
        (None, None, api.QOSClass.LSR, api.PriorityClass.PROD),
        (None, None, api.QOSClass.BE, api.PriorityClass.BATCH),
        ("koord-gold", None, api.QOSClass.LS, api.PriorityClass.PROD),
        # A present label decides even when unknown or empty (Koordinator's
        # GetPodPriorityClassRaw gives none), so spec.priority is not consulted: from the QoS.
        ("koord-gold", 5500, api.QOSClass.LS, api.PriorityClass.PROD),
        ("", 5500, api.QOSClass.LSR, api.PriorityClass.PROD),
        (None, 5500, api.QOSClass.LSR, api.PriorityClass.BATCH),  # no label: the band of 5500
    ],
)
def test_priority_table(
    label: str | None, priority: int | None, qos: api.QOSClass, expected: api.PriorityClass
) -> None:
    labels = {qosapi.LABEL_PRIORITY_CLASS: label} if label is not None else {}
    assert qosapi.priority_class_of(labels, priority, qos) is expected


def test_raw_qos_is_the_label_alone() -> None:
    unlabelled = podinfo.pod_info(pod(), None)
    labelled = podinfo.pod_info(pod(labels={qosapi.LABEL_QOS: "BE"}), None)
    assert unlabelled is not None and labelled is not None
    assert (unlabelled.qos, unlabelled.qos_raw) == (api.QOSClass.BE, api.QOSClass.NONE)
    assert (labelled.qos, labelled.qos_raw) == (api.QOSClass.BE, api.QOSClass.BE)


def test_full_pod_resources_batch_and_cgroup_dirs() -> None:
    raw = pod(
        requests=res("250m", "128Mi", **{qosapi.BATCH_CPU: "2000", qosapi.BATCH_MEMORY: "1Gi"}),
        limits=res("1", "256Mi", **{qosapi.BATCH_CPU: "4000", qosapi.BATCH_MEMORY: "2Gi"}),
        priority=5500,
    )
    info = podinfo.pod_info(raw, CGROUPFS)
    assert info is not None
    assert (info.kube_qos, info.qos, info.priority_class) == (
        api.KubeQOSClass.BURSTABLE,
        api.QOSClass.LS,
        api.PriorityClass.BATCH,
    )
    c = info.containers[0]
    assert (c.cpu_request_milli, c.cpu_limit_milli) == (250, 1000)
    assert (c.memory_request_bytes, c.memory_limit_bytes) == (128 * 2**20, 256 * 2**20)
    assert (c.batch_cpu_request_milli, c.batch_cpu_limit_milli) == (2000, 4000)
    assert (c.batch_memory_request_bytes, c.batch_memory_limit_bytes) == (2**30, 2**31)
    assert (c.container_id, c.runtime, c.running) == (CID, "containerd", True)
    assert info.cgroup_dir == f"kubepods/burstable/pod{UID}"
    assert c.cgroup_dir == f"kubepods/burstable/pod{UID}/{CID}"
    sysd = podinfo.pod_info(raw, SYSTEMD)
    assert sysd is not None
    assert sysd.containers[0].cgroup_dir.endswith(
        f"pod{UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope"
    )


@pytest.mark.parametrize(
    "bad_uid", ["../../../etc", "0F5E6A2C-1B3D-4E5F-8A9B-0C1D2E3F4A5B", "x" * 300, UID + "/..", "pod"]
)
def test_unsafe_uid_keeps_pod_without_cgroup_dirs(bad_uid: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        info = podinfo.pod_info(pod(uid=bad_uid, requests=res("1")), CGROUPFS)
    assert info is not None
    assert info.cgroup_dir == ""
    assert all(c.cgroup_dir == "" for c in info.containers)
    assert ".." not in info.cgroup_dir
    assert "kept without cgroup dirs" in caplog.text


@pytest.mark.parametrize(
    "bad_id", ["containerd://../../x", "rkt://" + CID, "containerd://" + CID[:-1], "docker://" + "G" * 64]
)
def test_unsafe_container_id_refused(bad_id: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        info = podinfo.pod_info(pod(container_id=bad_id), CGROUPFS)
    assert info is not None
    c = info.containers[0]
    assert (c.container_id, c.cgroup_dir) == ("", "")
    assert info.cgroup_dir == f"kubepods/besteffort/pod{UID}"  # the pod itself is fine
    assert "refusing container ID" in caplog.text


def test_no_uid_is_not_a_pod_and_bad_quantities_are_zero() -> None:
    assert podinfo.pod_info({"metadata": {"name": "x"}}, CGROUPFS) is None
    info = podinfo.pod_info(pod(requests={"cpu": "lots"}, limits={"memory": "1Gi"}), CGROUPFS)
    assert info is not None and info.containers[0].cpu_request_milli == 0
    assert info.containers[0].memory_limit_bytes == 2**30


def test_container_not_started_has_no_id() -> None:
    info = podinfo.pod_info(pod(container_id=None), CGROUPFS)
    assert info is not None
    assert info.containers[0].container_id == "" and not info.containers[0].running


def test_pod_ips_and_host_network(caplog: pytest.LogCaptureFixture) -> None:
    obj = pod()
    assert podinfo.pod_info(obj, CGROUPFS).ips == ()  # type: ignore[union-attr]
    obj["status"]["podIP"] = "10.0.0.5"
    assert podinfo.pod_info(obj, CGROUPFS).ips == ("10.0.0.5",)  # type: ignore[union-attr]
    # podIPs wins over podIP; addresses come back canonical, bad ones are dropped with a warning
    obj["status"]["podIPs"] = [{"ip": "10.0.0.5"}, {"ip": "fd00:0:0::7"}, {"ip": "10.0.0.5/24"}, {}]
    with caplog.at_level(logging.WARNING):
        info = podinfo.pod_info(obj, CGROUPFS)
    assert info is not None and info.ips == ("10.0.0.5", "fd00::7")
    assert "10.0.0.5/24" in caplog.text
    assert not info.host_network
    obj["spec"]["hostNetwork"] = True
    assert podinfo.pod_info(obj, CGROUPFS).host_network  # type: ignore[union-attr]
