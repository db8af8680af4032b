"""Compatibility path of the descheduler plugin framework, which lives in :mod:`koord.descheduler.framework`.

Every public name of that package is re-exported unchanged (the same objects), so a plugin that imports
``koordlet.descheduler.framework`` keeps working.
"""

from koord.descheduler.framework import *  # noqa: F403
from koord.descheduler.framework import __all__ as __all__  # noqa: PLC0414 (explicit re-export)
