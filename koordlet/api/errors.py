"""The agent's errors a plugin may meet or raise, so it can catch :class:`KoordletError` narrowly.

They are defined once, in :mod:`koordshared.runtime.errors` (stdlib only), and re-exported here.
"""

from __future__ import annotations

from koordshared.runtime.errors import (
    CgroupGone,
    InvalidValue,
    KoordletError,
    PluginError,
    ResourceUnsupported,
    UnsafePath,
)

__all__ = [
    "CgroupGone",
    "InvalidValue",
    "KoordletError",
    "PluginError",
    "ResourceUnsupported",
    "UnsafePath",
]
