"""Filter verdicts, scores and Filter's allocations shared between nodes alike for DeviceShare: the same
devices (all but their ids, which only PreBind reads), the same use of them, and the same values of the
node labels an allocation reads. A GPU fleet is mostly nodes of one kind, each holding a pod or two, so a
pod shape meets few distinct nodes: each is worked out once, not once per node. Only answers that the
shape, the devices and the node object decide alone are shared (the plugin's per-node memo's)."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping
from typing import Any

from koord.scheduler.plugins.deviceshare.nodedevice import NodeDevice
from koord.scheduler.plugins.deviceshare.resources import ByType
from koordshared.apis.scheduling import device as dv

SIZE = 4096
"""Answers kept (shapes x distinct nodes); all forgotten past this."""
NODE_LABELS = (
    dv.LABEL_GPU_VENDOR,
    dv.LABEL_GPU_MODEL,
    dv.LABEL_GPU_ISOLATION_PROVIDER,
    dv.LABEL_GPU_PARTITION_POLICY,
)
"""All an allocation reads of the Node object (GPU sharing refused, partition table, templates)."""
_CONTENT = ("alike",)


def _by_type(devices: ByType) -> tuple[Any, ...]:
    return tuple((t, tuple((m, tuple(r.items())) for m, r in d.items())) for t, d in devices.items())


def device_spec(nd: NodeDevice) -> Hashable:
    """What the Device object says, its ids left out; worked out again when the cache replaces it (the
    cache asks as it reads a Device, so that pods do not)."""
    parts = (nd.infos, nd.pcies, nd.gpu_partitions, nd.gpu_topology)
    kept = nd.spec_memo
    if kept is not None and all(a is b for a, b in zip(kept[0], parts, strict=True)):
        spec: Hashable = kept[1]
        return spec
    infos = [
        (t, [(d.minor, d.health, d.resources, d.labels, d.topology, d.vf_groups) for d in ds])
        for t, ds in nd.infos.items()
    ]
    key = repr((infos, nd.pcies, nd.gpu_partitions, nd.gpu_topology))
    nd.spec_memo = (parts, key)
    return key


def _content(nd: NodeDevice, node: Mapping[str, Any]) -> Hashable:
    """Equal for two nodes exactly when an allocation reads the same on both."""
    devices = (
        device_spec(nd),
        # Free is what is left of the total once the used is taken (NodeDevice keeps it so).
        _by_type(nd.total),
        _by_type(nd.used),
        tuple((t, tuple((m, tuple(sorted(b))) for m, b in v.items())) for t, v in nd.vfs.items()),
        nd.secondary_well_planned,
        nd.honor_gpu_partition,
    )
    labels = dv.labels_of(node)
    return devices, tuple(labels.get(name) for name in NODE_LABELS)


class AlikeNodes:
    """The shared answers by (answer kind, pod shape, templates generation) and the number standing for
    what the node is (:meth:`key`). Plain dict operations, each atomic: Filter and Score may run on
    several threads."""

    def __init__(self) -> None:
        self._answers: dict[Hashable, Any] = {}
        self._numbers: dict[Hashable, int] = {}
        self._next = itertools.count(1)

    def key(self, nd: NodeDevice, node: Mapping[str, Any]) -> int:
        """The number of what ``nd`` and ``node`` are as an allocation reads them (the caller holds
        ``nd``'s lock), kept with the devices while they do not change: hashed once, not per look-up.
        Numbers are never reused, so one kept past a reset still names only what it named."""
        found = nd.memo.get(_CONTENT)
        if found is not None and found[0] is node:
            number: int = found[1]
            return number
        content = _content(nd, node)
        number = self._numbers.get(content, 0)
        if not number:
            if len(self._numbers) >= SIZE:
                self._numbers.clear()
            number = self._numbers[content] = next(self._next)
        nd.remember(_CONTENT, node, number)
        return number

    def get(self, key: Hashable) -> Any:
        return self._answers.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        if len(self._answers) >= SIZE:
            self._answers.clear()
        self._answers[key] = value
