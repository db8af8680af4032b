"""``CoreSched``: Linux core-scheduling cookies per group of pods (Koordinator's ``hooks/coresched``).

On with the NodeSLO's CPU QoS policy ``coreSched`` and ``cpuQOS.enable`` for a class (by the labelled
class, else the Kubernetes class as GroupIdentity reads it). A container's group is its pod's
``koordinator.sh/core-sched-group-id`` label (empty: the class's shared group), the pod's UID under
``koordinator.sh/core-sched-policy: exclusive``, none under ``none``; a class with ``coreExpeller`` gets
``-expeller`` appended. Every process of a group's containers shares one cookie, so processes of different
groups never run on sibling SMT threads at once. Where the kernel has no core scheduling (this answer's
``rule.core_sched`` is off) nothing is asked; the agent says why once at start. Not done here: the
kube-QoS ``cpu.idle`` of ``schedIdle``, and clearing cookies when a pod's class is switched off.
"""

from __future__ import annotations

from koordlet import api
from koordlet.runtimehooks.cpuqos import CLASS_OF, CLASSES, cpu_policy, cpu_qos
from koordlet.runtimehooks.protocol import NOTHING, ContainerRequest, PodRequest, Resources, Rule

POLICY = "coreSched"
LABEL_GROUP_ID = "koordinator.sh/core-sched-group-id"
LABEL_POLICY = "koordinator.sh/core-sched-policy"
EXPELLER_SUFFIX = "-expeller"


def _params(slo: api.NodeSLO, key: str) -> tuple[bool, bool]:
    """``(enabled, expeller)`` of a class under the coreSched policy."""
    if cpu_policy(slo) != POLICY:
        return False, False
    cpu = cpu_qos(slo, key)
    return cpu.get("enable") is True, cpu.get("coreExpeller") is True


def enabled(slo: api.NodeSLO) -> bool:
    return any(_params(slo, k)[0] for k in CLASSES)


def group_of(slo: api.NodeSLO, pod: api.PodInfo, qos: api.QOSClass) -> str | None:
    """The pod's core-sched group, ``None`` when its class (or its label) keeps it out."""
    key = CLASS_OF.get(qos)
    if key is None:
        by_kube = {
            api.KubeQOSClass.GUARANTEED: "lsrClass" if _params(slo, "lsrClass")[0] else "lsClass",
            api.KubeQOSClass.BURSTABLE: "lsClass",
            api.KubeQOSClass.BESTEFFORT: "beClass",
        }
        key = by_kube[pod.kube_qos]
    on, expeller = _params(slo, key)
    policy = pod.labels.get(LABEL_POLICY, "")
    if not on or policy == "none":
        return None
    group = pod.uid if policy == "exclusive" else pod.labels.get(LABEL_GROUP_ID, "")
    return group + EXPELLER_SUFFIX if expeller else group


class CoreSched:
    name = "CoreSched"

    def pod(self, req: PodRequest, rule: Rule) -> Resources:
        return NOTHING

    def container(self, req: ContainerRequest, rule: Rule) -> Resources:
        if not rule.core_sched or req.sandbox:
            return NOTHING
        group = group_of(rule.slo, req.pod, req.qos)
        return NOTHING if group is None else Resources(core_sched_group=group)
