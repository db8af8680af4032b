"""DeviceShare: GPUs, RDMA NICs and FPGAs shared and allocated from the nodes' ``Device`` objects
(Koordinator's ``pkg/scheduler/plugins/deviceshare``, v1.8 semantics).

``args`` (fields, defaults, validation); ``requests`` and ``state`` (what a pod asks for); ``resources``
(per-device arithmetic); ``nodedevice`` and ``cache`` (each node's devices, built from Device objects and
the pods' allocation annotations); ``allocator``, ``devicepick``, ``gpuallocator`` and ``gputopology`` (the
allocation on one node); ``scoring``; ``templates`` (GPU shared-resource templates); ``reservation``
(devices held by reservations); ``plugin`` (the extension points).
"""

from koord.scheduler.plugins.deviceshare.plugin import NAME, DeviceShare

__all__ = ["NAME", "DeviceShare"]
