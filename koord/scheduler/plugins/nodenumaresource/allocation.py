"""What is bound on one node (Koordinator's ``node_allocation.go``): each pod's CPUs and NUMA resources,
how many pods hold each CPU (and the exclusive policy of the last), and the NUMA resources taken.

A :class:`PodAllocation` comes from a placement made here (Reserve) or from a bound pod's
``scheduling.koordinator.sh/resource-status`` (:func:`allocation_of`). CPUs are kept by id, without the
node's topology, so a pod listed before its node's NodeResourceTopology is counted once the report comes
(Koordinator drops such a pod). Not thread-safe: the resource manager holds its lock around every use.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from koord.scheduler.framework import Obj
from koord.scheduler.plugins.nodenumaresource.cputopology import AllocatedCPU, CPUTopology
from koordshared.apis.core.resources import value_of
from koordshared.apis.extension import numa as numaspec
from koordshared.apis.meta.cpulist import format_cpuset
from koordshared.apis.meta.quantity import format_bytes, format_decimal, format_milli, parse_quantity
from koordshared.runtime.errors import InvalidValue

Resources = dict[str, int]
NUMAResources = dict[int, Resources]

NUMA_IDLE, NUMA_SINGLE, NUMA_SHARED = "idle", "single", "shared"
"""A NUMA node's state for ``singleNUMANodeExclusive`` (Koordinator's ``NumaNodeStatus``): no bound CPUs,
only pods bound within it, or a pod spanning it and another NUMA node."""


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def sub_floor(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """``a - b`` per resource, never below zero; resources only in ``b`` are zero (quota's
    ``SubtractWithNonNegativeResult``)."""
    out = {k: max(v - b.get(k, 0), 0) for k, v in a.items()}
    for k in b:
        out.setdefault(k, 0)
    return out


def add_numa(*maps: Mapping[int, Mapping[str, int]]) -> NUMAResources:
    out: NUMAResources = {}
    for m in maps:
        for node, res in m.items():
            out[node] = add(out.get(node, {}), res)
    return out


def format_quantity(name: str, value: int) -> str:
    """An amount as the API writes it: cpu as millicores (``"4"``, ``"1500m"``), memory and huge pages
    in binary units, the rest as a decimal integer."""
    if name == "cpu":
        return format_milli(value)
    if name == "memory" or name.startswith("hugepages-"):
        return format_bytes(value)
    return format_decimal(value)


@dataclass(frozen=True, slots=True)
class PodAllocation:
    uid: str
    namespace: str = ""
    name: str = ""
    cpus: frozenset[int] = frozenset()
    exclusive: str = ""
    """The pod's ``preferredCPUExclusivePolicy``."""
    numa: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = ()
    """``(NUMA node, ((resource, amount), ...))`` by node."""

    def numa_map(self) -> NUMAResources:
        return {n: dict(r) for n, r in self.numa}

    def resource_status(self) -> numaspec.ResourceStatus:
        """The ``resource-status`` annotation of this placement."""
        nodes = tuple(
            numaspec.NUMANodeResource(n, {k: format_quantity(k, v) for k, v in sorted(res)})
            for n, res in self.numa
        )
        return numaspec.ResourceStatus(format_cpuset(self.cpus) if self.cpus else "", nodes)

    def status_annotation(self) -> str:
        """:meth:`resource_status` as the annotation's text; remembered, as pods placed alike share it."""
        return _status_text(self.cpus, self.numa)


@functools.lru_cache(maxsize=1024)
def _status_text(cpus: frozenset[int], numa: tuple[tuple[int, tuple[tuple[str, int], ...]], ...]) -> str:
    return PodAllocation(uid="", cpus=cpus, numa=numa).resource_status().annotation()


def numa_tuple(
    resources: Mapping[int, Mapping[str, int]],
) -> tuple[tuple[int, tuple[tuple[str, int], ...]], ...]:
    return tuple((n, tuple(sorted(r.items()))) for n, r in sorted(resources.items()) if r)


def allocation_of(pod: Obj) -> PodAllocation | None:
    """The placement a bound pod carries (``resource-status`` and its ``resource-spec`` exclusive policy);
    ``None`` when it has none. A malformed annotation is :class:`InvalidValue`."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    status = annotations.get(numaspec.ANNOTATION_RESOURCE_STATUS)
    spec = annotations.get(numaspec.ANNOTATION_RESOURCE_SPEC)
    if isinstance(status, str | None) and isinstance(spec, str | None):
        held = _held_cached(status, spec)  # pods of one shape placed alike carry the same texts
    else:
        held = _held(annotations)
    if held is None:
        return None
    cpus, exclusive, numa = held
    return PodAllocation(
        uid=str(meta.get("uid") or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        cpus=cpus,
        exclusive=exclusive,
        numa=numa,
    )


_Held = tuple[frozenset[int], str, tuple[tuple[int, tuple[tuple[str, int], ...]], ...]]


@functools.lru_cache(maxsize=1024)
def _held_cached(status: str | None, spec: str | None) -> _Held | None:
    notes = {
        k: v
        for k, v in ((numaspec.ANNOTATION_RESOURCE_STATUS, status), (numaspec.ANNOTATION_RESOURCE_SPEC, spec))
        if v is not None
    }
    return _held(notes)


def _held(annotations: Mapping[str, Any]) -> _Held | None:
    """``(CPUs, exclusive policy, NUMA resources)`` of the annotations; ``None``: no placement."""
    status = numaspec.resource_status(annotations)
    if not status.cpuset and not status.numa_node_resources:
        return None
    spec = numaspec.resource_spec(annotations)
    resources: NUMAResources = {}
    for entry in status.numa_node_resources:
        res = resources.setdefault(entry.node, {})
        for name, text in entry.resources.items():
            try:
                res[name] = res.get(name, 0) + value_of(name, parse_quantity(text))
            except InvalidValue as err:
                raise InvalidValue(numaspec.ANNOTATION_RESOURCE_STATUS, text, f"{name}: {err}") from err
    return status.cpus, spec.preferred_cpu_exclusive_policy, numa_tuple(resources)


_VERSIONS = itertools.count(1)


class NodeAllocation:
    """The pods bound on one node and what they hold."""

    __slots__ = ("_fingerprint", "cpus", "numa", "pods", "version")

    def __init__(self) -> None:
        self.pods: dict[str, PodAllocation] = {}
        self.cpus: dict[int, AllocatedCPU] = {}
        self.numa: NUMAResources = {}
        self._fingerprint: str | None = ""
        self.version = next(_VERSIONS)
        """Changes with every change of what is held; unique across NodeAllocations (one made again for
        a node does not reuse it), so what was worked out from it is current while it is."""

    def fingerprint(self) -> str:
        """Equal for nodes holding alike (the same CPUs, NUMA amounts, and CPU sets per pod, whoever the
        pods are); ``""`` for an empty node."""
        if self._fingerprint is None:
            sets = sorted(tuple(sorted(a.cpus)) for a in self.pods.values() if a.cpus)
            self._fingerprint = repr(
                (
                    sorted((c, a.refs, a.exclusive) for c, a in self.cpus.items()),
                    sorted((n, sorted(r.items())) for n, r in self.numa.items()),
                    sets,
                )
            )
        return self._fingerprint

    def add(self, alloc: PodAllocation) -> None:
        if alloc.uid in self.pods:
            return
        self._fingerprint = None
        self.version = next(_VERSIONS)
        self.pods[alloc.uid] = alloc
        for cpu in alloc.cpus:
            held = self.cpus.get(cpu)
            self.cpus[cpu] = AllocatedCPU((held.refs if held else 0) + 1, alloc.exclusive)
        for node, res in alloc.numa:
            self.numa[node] = add(self.numa.get(node, {}), dict(res))

    def update(self, alloc: PodAllocation) -> None:
        if self.pods.get(alloc.uid) == alloc:
            return  # the holding it has (a bound pod's update carrying the placement Reserve made)
        self.release(alloc.uid)
        self.add(alloc)

    def release(self, uid: str) -> PodAllocation | None:
        alloc = self.pods.pop(uid, None)
        if alloc is None:
            return None
        self._fingerprint = None
        self.version = next(_VERSIONS)
        for cpu in alloc.cpus:
            held = self.cpus.get(cpu)
            if held is None:
                continue
            if held.refs <= 1:
                del self.cpus[cpu]
            else:
                self.cpus[cpu] = AllocatedCPU(held.refs - 1, held.exclusive)
        for node, res in alloc.numa:
            self.numa[node] = sub_floor(self.numa.get(node, {}), dict(res))
        return alloc

    def held(self, *returned: Iterable[int]) -> dict[int, AllocatedCPU]:
        """The bound CPUs, each of ``returned`` given back once (a reservation's CPUs restored to its
        owner, a victim's in a preemption what-if: one CPU may come back once per holder)."""
        out = dict(self.cpus)
        for cpus in returned:
            for cpu in cpus:
                a = out.get(cpu)
                if a is None:
                    continue
                if a.refs <= 1:
                    del out[cpu]
                else:
                    out[cpu] = AllocatedCPU(a.refs - 1, a.exclusive)
        return out

    def available_cpus(
        self, topo: CPUTopology, max_refs: int, reserved: frozenset[int], *returned: Iterable[int]
    ) -> tuple[frozenset[int], dict[int, AllocatedCPU]]:
        """``(free CPUs, bound CPUs)``: the topology's CPUs less those held by ``max_refs`` pods and the
        reserved ones (Koordinator's ``getAvailableCPUs``)."""
        held = self.held(*returned)
        full = {c for c, a in held.items() if a.refs >= max_refs}
        return topo.cpus - full - reserved, held

    def available_numa(
        self,
        numa_resources: Iterable[tuple[int, Mapping[str, int]]],
        reusable: Mapping[int, Mapping[str, int]],
    ) -> tuple[NUMAResources, NUMAResources]:
        """``(available, allocated)`` per NUMA node: allocatable less what is bound there, ``reusable``
        (a reservation's or victims' share) given back."""
        available: NUMAResources = {}
        allocated: NUMAResources = {}
        for node, allocatable in numa_resources:
            used = self.numa.get(node)
            if used is not None:
                used = sub_floor(used, reusable.get(node, {}))
                allocated[node] = used
            available[node] = sub_floor(allocatable, used or {})
        return available, allocated

    def numa_states(self, topo: CPUTopology, numa_nodes: Iterable[int]) -> dict[int, str]:
        """Each NUMA node's :data:`NUMA_IDLE` / :data:`NUMA_SINGLE` / :data:`NUMA_SHARED` from the bound
        pods' CPUs."""
        single: set[int] = set()
        shared: set[int] = set()
        for alloc in self.pods.values():
            used = {topo.details[c].node for c in alloc.cpus if c in topo.details}
            (shared if len(used) > 1 else single).update(used)
        out = {}
        for n in numa_nodes:
            out[n] = NUMA_SHARED if n in shared else NUMA_SINGLE if n in single else NUMA_IDLE
        return out
