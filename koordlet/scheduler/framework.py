"""Compatibility path of the scheduler plugin framework, which lives in :mod:`koord.scheduler.framework`.

Every public name of that package is re-exported unchanged (the same objects), so a plugin that imports
``koordlet.scheduler.framework`` keeps working.
"""

from koord.scheduler.framework import *  # noqa: F403
from koord.scheduler.framework import __all__ as __all__  # noqa: PLC0414 (explicit re-export)
