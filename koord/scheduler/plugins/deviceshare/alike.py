"""Filter verdicts, scores and Filter's allocations shared between nodes alike for DeviceShare: the same
devices (all but their ids, which only PreBind reads), the same use of them, and the same values of the
node labels an allocation reads. A GPU fleet is mostly nodes of one kind, each holding a pod or two, so a
pod shape meets few distinct nodes: each is worked out once, not once per node. Only answers that the
shape, the devices and the node object decide alone are shared (the plugin's per-node memo's)."""

from __future__ import annotations

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


def content_key(nd: NodeDevice, node: Mapping[str, Any]) -> Hashable:
    """Equal for two nodes exactly when an allocation reads the same on both (the caller holds ``nd``'s
    lock); kept with the devices while they do not change."""
    found = nd.memo.get(_CONTENT)
    if found is None or found[0] is not node:
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
        found = (node, (devices, tuple(labels.get(name) for name in NODE_LABELS)))
        nd.remember(_CONTENT, node, found[1])
    key: Hashable = found[1]
    return key


class AlikeNodes:
    """The shared answers by (answer kind, pod shape, templates generation, :func:`content_key`). Plain
    dict operations, each atomic: Filter and Score may run on several threads."""

    def __init__(self) -> None:
        self._answers: dict[Hashable, Any] = {}
        self.shared = 0
        """Answers given from another node's (for tests)."""

    def get(self, key: Hashable) -> Any:
        found = self._answers.get(key)
        if found is not None:
            self.shared += 1
        return found

    def put(self, key: Hashable, value: Any) -> None:
        if len(self._answers) >= SIZE:
            self._answers.clear()
        self._answers[key] = value
