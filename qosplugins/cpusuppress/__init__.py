"""BECPUSuppress as a package: the plugin (:mod:`.plugin`), the BE CPU budget and how the node's CPU
splits (:mod:`.budget`), the cpuset policy's CPUs (:mod:`.cpuset`) and the fast path's rise detector
(:mod:`.fastrise`)."""

from qosplugins.cpusuppress.plugin import BECPUSuppress

__all__ = ["BECPUSuppress"]
