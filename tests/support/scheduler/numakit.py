"""Builders for the NodeNUMAResource tests: Koordinator's shipped profile points for the plugin, LSE/LSR
and plain pods, nodes with a simulated topology reported as the agent reports it, and a MemoryScheduler
on them; the placement a pod was given, read back with the agent's own parser."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.numa import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    ResourceStatus,
    resource_status,
)
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.testing import node, pod
from koordshared.testing.topology import TWO_SOCKETS, SimulatedTopology, node_resource_topology

S = "koord-scheduler"
NUMA = "NodeNUMAResource"
NRT_CACHE = "noderesourcetopologies"


def profile(args: Mapping[str, Any] | None = None, *, weight: int = 1) -> dict[str, Any]:
    on = [{"name": NUMA}]
    out: dict[str, Any] = {
        "schedulerName": S,
        "plugins": {
            "preFilter": {"enabled": on},
            "filter": {"enabled": on},
            "preScore": {"enabled": on},
            "score": {"enabled": [{"name": NUMA, "weight": weight}]},
            "reserve": {"enabled": on},
            "preBind": {"enabled": [{"name": NUMA}, {"name": "DefaultPreBind"}]},
        },
    }
    if args is not None:
        out["pluginConfig"] = [{"name": NUMA, "args": dict(args)}]
    return out


def kit(args: Mapping[str, Any] | None = None, **kw: Any) -> MemoryScheduler:
    return MemoryScheduler({"profiles": [profile(args, **kw)]})


def add_node(
    k: MemoryScheduler,
    name: str,
    topo: SimulatedTopology | None = TWO_SOCKETS,
    *,
    labels: Mapping[str, str] | None = None,
    policy: str = "None",
    kubelet: nrt.KubeletCPUManagerPolicy | None = None,
    annotations: Mapping[str, str] | None = None,
    memory: str = "",
    cpu: str = "",
) -> None:
    """A node as big as ``topo`` (its allocatable, unless ``cpu`` or ``memory`` say otherwise), reported
    by its agent (``topo`` None: not reported)."""
    cpus = cpu or (topo.cpu_count if topo is not None else 16)
    mem = memory or (f"{topo.numa_nodes * topo.memory_per_numa}" if topo is not None else "64Gi")
    k.add_node(node(name, str(cpus), mem, labels=labels))
    if topo is not None:
        report(k, name, topo, policy=policy, kubelet=kubelet, annotations=annotations)


def report(k: MemoryScheduler, name: str, topo: SimulatedTopology, **kw: Any) -> None:
    k.informers[NRT_CACHE].put(node_resource_topology(name, topo, **kw))


def lsr(
    name: str,
    cpu: str,
    memory: str = "1Gi",
    *,
    qos: str = "LSR",
    spec: Mapping[str, str] | None = None,
    numa: Mapping[str, str] | None = None,
    priority_class: str = "koord-prod",
    node_name: str = "",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod of ``qos`` (LSR by default, prod) requesting ``cpu`` and ``memory``; ``spec`` its
    ``resource-spec``, ``numa`` its ``numa-topology-spec``."""
    notes = dict(annotations or {})
    if spec is not None:
        notes[ANNOTATION_RESOURCE_SPEC] = json.dumps(dict(spec))
    if numa is not None:
        notes["scheduling.koordinator.sh/numa-topology-spec"] = json.dumps(dict(numa))
    labels = {"koordinator.sh/qosClass": qos}
    if priority_class:
        labels["koordinator.sh/priority-class"] = priority_class
    return pod(
        name,
        requests={"cpu": cpu, "memory": memory},
        limits={"cpu": cpu, "memory": memory},
        labels=labels,
        annotations=notes,
        scheduler_name=S,
        node_name=node_name,
    )


def plain(name: str, cpu: str = "1", memory: str = "1Gi", **kw: Any) -> dict[str, Any]:
    return pod(name, requests={"cpu": cpu, "memory": memory}, scheduler_name=S, **kw)


def patched(k: MemoryScheduler, name: str) -> dict[str, str]:
    """The annotations the scheduler's PreBind PATCH set on ``default/<name>``."""
    out: dict[str, str] = {}
    for patch in k.api.patches.get(f"default/{name}", []):
        out.update((patch.get("metadata") or {}).get("annotations") or {})
    return out


def placement(k: MemoryScheduler, name: str) -> ResourceStatus:
    """The placement ``default/<name>`` was given, read with the agent's parser."""
    return resource_status(patched(k, name))


def status_text(k: MemoryScheduler, name: str) -> str:
    return patched(k, name).get(ANNOTATION_RESOURCE_STATUS, "")


def messages(k: MemoryScheduler, name: str) -> list[str]:
    return [m for who, _, reason, m in k.events("FailedScheduling") if who == f"default/{name}"]
