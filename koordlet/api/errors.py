"""The agent's errors a plugin may meet or raise, so it can catch :class:`KoordletError` narrowly.

``KoordletError`` is the agent's name for the shared base
(:class:`~koordshared.runtime.errors.KoordinatorError`), so it also catches the shared errors re-exported
here. The host errors are the agent's own: ``system/`` translates ``OSError`` into :class:`CgroupGone` or
:class:`ResourceUnsupported` with ``raise ... from err`` (a refused write is an ``UpdateResult`` error, not an
exception), so callers never see a bare errno.
"""

from __future__ import annotations

from koordshared.runtime.errors import InvalidValue, KoordinatorError, PluginError

KoordletError = KoordinatorError
"""Base of every error the agent raises on purpose (the shared base, under the agent's name)."""


class UnsafePath(KoordletError):
    """A pod UID, container ID or cgroup path that would leave its root, or is malformed."""


class ResourceUnsupported(KoordletError):
    """The kernel or cgroup version does not offer this resource (e.g. cfs burst on an old kernel)."""


class CgroupGone(KoordletError):
    """The cgroup vanished (pod deleted): a skipped sample or write, never a crash."""


__all__ = [
    "CgroupGone",
    "InvalidValue",
    "KoordletError",
    "PluginError",
    "ResourceUnsupported",
    "UnsafePath",
]
