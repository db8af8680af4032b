"""NodeNUMAResource (Koordinator's ``pkg/scheduler/plugins/nodenumaresource``): whole CPUs and NUMA
nodes for LSE/LSR pods from the node's NodeResourceTopology, written to the pod as
``scheduling.koordinator.sh/resource-status`` for the agent to pin
(``docs/scheduler/nodenumaresource.md``)."""

from koord.scheduler.plugins.nodenumaresource.plugin import NAME, NodeNUMAResource

__all__ = ["NAME", "NodeNUMAResource"]
