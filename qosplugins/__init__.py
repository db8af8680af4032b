"""Built-in QoS plugins. Each module sees only ``koordlet.api``; this table is the whole registration.

The agent's loader reads :data:`BUILTIN` (no import side effects register anything); third-party plugins
come from the ``koordlet.qos_plugins`` entry-point group instead.
"""

from __future__ import annotations

from koordlet import api
from qosplugins.blkio import BlkIOReconcile
from qosplugins.cgreconcile import CgroupReconcile
from qosplugins.cpuburst import CPUBurst
from qosplugins.cpuevict import BECPUEvict
from qosplugins.cpusuppress import BECPUSuppress
from qosplugins.memoryevict import BEMemoryEvict
from qosplugins.netqos import TCNetworkQoS
from qosplugins.resctrl import RdtResctrl
from qosplugins.sysreconcile import SystemConfig

BUILTIN: tuple[type[api.QOSPlugin], ...] = (
    BECPUSuppress,
    CPUBurst,
    BECPUEvict,
    BEMemoryEvict,
    RdtResctrl,
    CgroupReconcile,
    SystemConfig,
    BlkIOReconcile,
    TCNetworkQoS,
)

__all__ = [
    "BUILTIN",
    "BECPUEvict",
    "BECPUSuppress",
    "BEMemoryEvict",
    "BlkIOReconcile",
    "CPUBurst",
    "CgroupReconcile",
    "RdtResctrl",
    "SystemConfig",
    "TCNetworkQoS",
]
