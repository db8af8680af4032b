"""``GroupIdentity``: ``cpu.bvt_warp_ns`` by QoS class, where the kernel has it (Koordinator's
``hooks/groupidentity``; Alibaba Cloud Linux / Anolis kernels).

With the NodeSLO's CPU QoS policy ``groupIdentity`` (the default) and ``cpuQOS.enable`` for a class, its
pods get the class's ``groupIdentity`` (defaults LSR 2, LS 2, BE -1), otherwise 0. Pod level by the
labelled class, else by the Kubernetes class (Guaranteed follows LSR when enabled, else LS; Burstable LS;
BestEffort BE); the kube-QoS dirs: besteffort the BE value, burstable the LS value, the Guaranteed root 0.
Containers inherit from their pod. On a kernel without the file the hook answers nothing; the agent says
so once at start.
"""

from __future__ import annotations

from koordlet import api
from koordlet.runtimehooks.cpuqos import CLASS_OF, CLASSES, cpu_policy, cpu_qos
from koordlet.runtimehooks.protocol import NOTHING, ContainerRequest, PodRequest, Resources, Rule

POLICY = "groupIdentity"


def _class_value(slo: api.NodeSLO, key: str) -> int | None:
    """The class's ``groupIdentity`` when its CPU QoS is on under the groupIdentity policy, else None."""
    if cpu_policy(slo) not in (None, POLICY):
        return None
    cpu = cpu_qos(slo, key)
    if cpu.get("enable") is not True:
        return None
    value = cpu.get("groupIdentity")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def pod_bvt(slo: api.NodeSLO, qos: api.QOSClass, kube_qos: api.KubeQOSClass) -> int:
    key = CLASS_OF.get(qos)
    if key is not None:
        return _class_value(slo, key) or 0
    lsr, ls, be = (_class_value(slo, k) for k in CLASSES)
    by_kube = {
        api.KubeQOSClass.GUARANTEED: lsr if lsr is not None else ls,
        api.KubeQOSClass.BURSTABLE: ls,
        api.KubeQOSClass.BESTEFFORT: be,
    }
    return by_kube[kube_qos] or 0


def tier_bvt(slo: api.NodeSLO, kube_qos: api.KubeQOSClass) -> int:
    if kube_qos is api.KubeQOSClass.BESTEFFORT:
        return _class_value(slo, "beClass") or 0
    if kube_qos is api.KubeQOSClass.BURSTABLE:
        return _class_value(slo, "lsClass") or 0
    return 0  # the Guaranteed root stays 0 (koordlet: until the kernel supports more)


def enabled(slo: api.NodeSLO) -> bool:
    return any(_class_value(slo, k) is not None for k in CLASSES)


class GroupIdentity:
    name = "GroupIdentity"

    def pod(self, req: PodRequest, rule: Rule) -> Resources:
        if not rule.group_identity:
            return NOTHING
        return Resources(bvt_warp_ns=pod_bvt(rule.slo, req.qos, req.pod.kube_qos))

    def container(self, req: ContainerRequest, rule: Rule) -> Resources:
        return NOTHING

    def kube_qos(self, kube_qos: api.KubeQOSClass, rule: Rule) -> Resources:
        if not rule.group_identity:
            return NOTHING
        return Resources(bvt_warp_ns=tier_bvt(rule.slo, kube_qos))
