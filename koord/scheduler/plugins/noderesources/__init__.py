"""NodeResourcesFit and NodeResourcesBalancedAllocation: ``args`` (fields, defaults, validation),
``scoring`` (the strategies over arrays), ``plugins`` (the extension points)."""

from koord.scheduler.plugins.noderesources.plugins import (
    BALANCED,
    FIT,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
)

__all__ = ["BALANCED", "FIT", "NodeResourcesBalancedAllocation", "NodeResourcesFit"]
